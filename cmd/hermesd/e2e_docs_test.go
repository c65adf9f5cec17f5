package main

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documentation's walkthroughs, run as written (doc_shell_test.go):
// each test takes the blocks of its pages in order, in a checkout of its
// own, and checks what the pages say they do.

// docDrill runs a drill line and checks its exit code.
func docDrill(t *testing.T, c *checkout, want int, line string) (string, string) {
	t.Helper()
	code, stdout, stderr := c.run(line)
	if code != want {
		t.Fatalf("%s: exit %d, want %d\n%s%s", line, code, want, stdout, stderr)
	}
	return stdout, stderr
}

// TestE2EFirstHour follows the README: the quick start and the first
// hour, block by block.
//
//   - make run publishes both agents' pointers; make test is what CI runs.
//   - status and pointer get show both agents ready and auditor's record.
//   - An edit to a skill is uploaded (less than the first snapshot) and
//     published; log lists both snapshots; the record moved.
//   - scout's record resolves through L1 by the wildcard resolver, in one
//     lookup through the devnet's gateway.
//   - A drill beside the daemon passes, read-only.
//   - /readyz is ready, /metrics has the series the docs tell to alert
//     on, cost accounts for auditor.
//   - Stopped, the brain deleted, make run again: the brain comes back
//     byte for byte.
func TestE2EFirstHour(t *testing.T) {
	t.Parallel()
	w := newProcessWorld(t)
	c := newCheckout(t, w)
	brain := c.path(".devnet/brains/auditor")

	t.Log("quick start")
	quick := docBlock(t, "quick-start")
	run := c.start(quick.take("make run"))
	for _, agent := range []string{"agent=auditor", "agent=scout"} {
		if !run.waitLines(1, 2*time.Minute, msgPublished, agent) {
			t.Fatalf("make run did not publish %s's pointer:\n%s", agent, run.out.String())
		}
	}
	c.ranByCI(quick.take("make test"))

	t.Log("look around")
	look := docBlock(t, "first-look")
	c.mustRun(look.take("export HERMESD_CONFIG="))
	if out := c.mustRun(look.take("status")); !strings.Contains(out, "all agents ready") ||
		!regexp.MustCompile(`(?m)^auditor +ready`).MatchString(out) || !regexp.MustCompile(`(?m)^scout +ready`).MatchString(out) {
		t.Errorf("status:\n%s", out)
	}
	first := strings.TrimSpace(c.mustRun(look.take("pointer get auditor.hermes.eth")))
	if n, _ := run.out.count(msgPublished, "agent=auditor", "blob="+first+" "); n != 1 {
		t.Errorf("pointer get says %q, which the daemon did not publish", first)
	}

	t.Log("edit a skill")
	edit := docBlock(t, "first-edit")
	c.mustRun(edit.take(`echo "- check oracle freshness" >> .devnet/brains/auditor/skills/reentrancy.md`))
	h := dirHash(t, brain)
	run.mustWaitUpload(h, time.Minute)
	if !run.waitLines(2, time.Minute, msgPublished, "agent=auditor") {
		t.Fatalf("the edit's pointer was not published:\n%s", run.out.String())
	}
	uploaded := func(hash string) int {
		for _, l := range strings.Split(run.out.String(), "\n") {
			if strings.Contains(l, msgUploaded) && strings.Contains(l, "agent=auditor") && (hash == "" || strings.Contains(l, "bundle_hash="+hash+" ")) {
				m := regexp.MustCompile(` uploaded=(\d+) `).FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("no uploaded= in %s", l)
				}
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
		t.Fatalf("no upload of %s", hash)
		return 0
	}
	if edited, whole := uploaded(h), uploaded(""); edited >= whole/2 {
		t.Errorf("the edit uploaded %d bytes, the whole first snapshot %d: not only what changed", edited, whole)
	}
	if out := c.mustRun(edit.take("log auditor")); !regexp.MustCompile(`(?m)^0 .* `+h+` .* restorable`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1 .* `+first+`$`).MatchString(out) {
		t.Errorf("log does not list the edit's snapshot (%s) and the first (%s):\n%s", h, first, out)
	}
	if moved := strings.TrimSpace(c.mustRun(edit.take("pointer get auditor.hermes.eth"))); moved == first || moved == "" {
		t.Errorf("the record did not move: %q", moved)
	}

	t.Log("the agent on the L2")
	l2 := docBlock(t, "first-l2")
	var res struct {
		Value    string   `json:"value"`
		Via      string   `json:"via"`
		Lookups  int      `json:"lookups"`
		Gateways []string `json:"gateways"`
	}
	out := c.mustRun(l2.take("pointer get --json scout.l2.hermes.eth"))
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Value == "" || res.Via != "wildcard" || res.Lookups != 1 ||
		len(res.Gateways) != 1 || res.Gateways[0] != "http://"+c.expand(docGatewayAddr) {
		t.Errorf("scout's record through L1: %v\n%s", err, out)
	}

	t.Log("a drill")
	if out, _ := docDrill(t, c, exitOK, docBlock(t, "first-drill").take("drill auditor")); !strings.Contains(out, "read-only") || !strings.Contains(out, "PASS:") {
		t.Errorf("drill beside make run:\n%s", out)
	}

	t.Log("health, metrics and cost")
	obs := docBlock(t, "first-observe")
	if out := c.mustRun(obs.take("/readyz")); !strings.Contains(out, `"ready": true`) {
		t.Errorf("readyz:\n%s", out)
	}
	metrics := c.mustRun(obs.take("/metrics"))
	for _, series := range []string{"hermesd_unsaved_change_age_seconds", "hermesd_pointer_pending_age_seconds", "hermesd_pointer_check_age_seconds",
		"hermesd_agent_ready", "hermesd_agent_healthy", "hermesd_pointer_held", "hermesd_walrus_cost_frost_total"} {
		if !strings.Contains(metrics, "\n"+series+"{") {
			t.Errorf("/metrics has no %s", series)
		}
	}
	if out := c.mustRun(obs.take("cost auditor")); !strings.HasPrefix(out, "agent auditor: recorded since") || !strings.Contains(out, "quilt patches") {
		t.Errorf("cost:\n%s", out)
	}

	t.Log("wipe and restart")
	before := hashedTree(t, brain)
	c.interrupt(run)
	wipe := docBlock(t, "first-wipe")
	c.mustRun(wipe.take("rm -rf .devnet/brains/auditor"))
	if _, err := os.Stat(brain); !os.IsNotExist(err) {
		t.Fatalf("the brain is still there: %v", err)
	}
	run = c.start(wipe.take("make run"))
	if !run.waitLines(1, 2*time.Minute, msgReady, "agent=auditor", "origin=restored") {
		t.Fatalf("make run did not restore the brain:\n%s", run.out.String())
	}
	if diffs := sameTree(before, hashedTree(t, brain)); len(diffs) > 0 {
		t.Errorf("the restored brain differs: %v", diffs)
	}
	c.interrupt(run)
}

// TestE2EDocDrills follows docs/operations.md, Amnesia drills, as separate
// processes like a user's terminals:
//
//  1. make run; beside it, with HERMESD_CONFIG set, `drill auditor` and
//     `--mode a` pass and leave brain and state as they were;
//     `--destructive` exits 5 saying to stop hermesd.
//  2. make devnet and `hermesd run` in another terminal, the daemon
//     stopped: `drill auditor` and `drill --destructive auditor` pass.
//  3. The devnet stopped too: `drill auditor` exits 1 with the one line
//     the page shows; with `hermesd walrus serve` serving the devnet's
//     blobs, `drill --mode a auditor` passes without any chain.
func TestE2EDocDrills(t *testing.T) {
	t.Parallel()
	w := newProcessWorld(t)
	c := newCheckout(t, w)
	brain, state := c.path(".devnet/brains/auditor"), c.path(".devnet/state/agents/auditor")

	t.Log("1. make run, and drills beside it")
	run := c.start("make run") // the page's starting point
	if !run.waitLines(1, 2*time.Minute, msgPublished, "agent=auditor") {
		t.Fatalf("make run did not publish auditor's pointer:\n%s", run.out.String())
	}
	if first := firstLine(t, c.path(".devnet/hermesd.yml")); first != devnetConfigHeader {
		t.Fatalf("the devnet's configuration begins %q, not %q (what the drill's hint looks for)", first, devnetConfigHeader)
	}
	brainBefore, stateBefore := hashedTree(t, brain), listDir(t, state)
	beside := docBlock(t, "drill-beside")
	c.mustRun(beside.take("export HERMESD_CONFIG=.devnet/hermesd.yml"))
	if out, _ := docDrill(t, c, exitOK, beside.take("drill auditor")); !strings.Contains(out, "read-only") || !strings.Contains(out, "PASS:") {
		t.Errorf("drill beside make run:\n%s", out)
	}
	if out, _ := docDrill(t, c, exitOK, beside.take("drill --mode a auditor")); !strings.Contains(out, "the state directory's newest verified snapshot") {
		t.Errorf("drill --mode a beside make run:\n%s", out)
	}
	if diffs := sameTree(brainBefore, hashedTree(t, brain)); len(diffs) > 0 {
		t.Errorf("the drills changed the brain: %v", diffs)
	}
	if got := listDir(t, state); strings.Join(got, ",") != strings.Join(stateBefore, ",") {
		t.Errorf("the drills changed the state directory: %v, before %v", got, stateBefore)
	}
	// What the page says of --destructive beside a running daemon.
	if _, stderr := docDrill(t, c, exitLocked, "bin/hermesd drill --destructive auditor"); !strings.Contains(stderr, "stop hermesd first") {
		t.Errorf("drill --destructive beside the daemon: %s", stderr)
	}
	c.interrupt(run)

	t.Log("2. make devnet, hermesd run in another terminal, stopped")
	dn := c.start(docBlock(t, "drill-devnet").take("make devnet"))
	dn.mustWaitLine("devnet running", 1, 2*time.Minute)
	daemon := c.start(docBlock(t, "drill-daemon").take("bin/hermesd run"))
	daemon.mustWaitLine(msgReady, 2, time.Minute)
	c.interrupt(daemon)
	destructive := docBlock(t, "drill-destructive")
	if out, _ := docDrill(t, c, exitOK, destructive.take("drill auditor")); !strings.Contains(out, "PASS:") {
		t.Errorf("drill with the daemon stopped:\n%s", out)
	}
	before := hashedTree(t, brain)
	if out, _ := docDrill(t, c, exitOK, destructive.take("drill --destructive auditor")); !strings.Contains(out, "brain back in place, byte-identical") {
		t.Errorf("drill --destructive:\n%s", out)
	}
	if diffs := sameTree(before, hashedTree(t, brain)); len(diffs) > 0 {
		t.Errorf("the destructive drill changed the brain: %v", diffs)
	}

	t.Log("3. no chain at all")
	c.interrupt(dn)
	_, stderr := docDrill(t, c, exitFailure, docBlock(t, "drill-no-chain").take("drill auditor"))
	if want := c.expand(docBlock(t, "drill-no-chain-says").text()) + "\n"; stderr != want {
		t.Errorf("drill without a chain says\n%q\nthe page shows\n%q", stderr, want)
	}
	alone := docBlock(t, "drill-walrus-alone")
	walrus := c.start(alone.take("walrus serve --dir .devnet/walrus"))
	walrus.mustWaitLine("local walrus listening", 1, time.Minute)
	if out, _ := docDrill(t, c, exitOK, alone.take("drill --mode a auditor")); !strings.Contains(out, "PASS:") || !strings.Contains(out, "the key + blob id alone") {
		t.Errorf("drill --mode a without a chain:\n%s", out)
	}
	c.interrupt(walrus)
}

// TestE2EDocSeal follows docs/formats.md, Seal threshold encryption: after
// make run, the devnet started with -format seal seals the next snapshot
// to its key servers, and a drill restores it through them.
func TestE2EDocSeal(t *testing.T) {
	t.Parallel()
	w := newProcessWorld(t)
	c := newCheckout(t, w)

	run := c.start("make run") // the page's starting point: the checkout after make run
	if !run.waitLines(1, 2*time.Minute, msgPublished, "agent=auditor") {
		t.Fatalf("make run did not publish auditor's pointer:\n%s", run.out.String())
	}
	c.interrupt(run)

	sealed := c.start(docBlock(t, "seal-devnet").take("bin/hermesd-devnet -format seal -- bin/hermesd run"))
	sealed.mustWaitLine(msgReady, 2, 2*time.Minute)
	drill := docBlock(t, "seal-drill")
	c.mustRun(drill.take("export HERMESD_CONFIG=.devnet/hermesd.yml"))
	c.mustRun(drill.take("echo"))
	if !sealed.waitLines(1, time.Minute, msgUploaded, "agent=auditor", "format=seal") ||
		!sealed.waitLines(1, time.Minute, msgPublished, "agent=auditor") {
		t.Fatalf("the edit was not sealed and published:\n%s", sealed.out.String())
	}
	m := regexp.MustCompile(msgUploaded + ` agent=auditor blob=(\S+) format=seal `).FindStringSubmatch(sealed.out.String())
	if m == nil {
		t.Fatalf("no sealed upload of auditor:\n%s", sealed.out.String())
	}
	if out, _ := docDrill(t, c, exitOK, drill.take("drill auditor")); !strings.Contains(out, "PASS:") || !strings.Contains(out, "blob    "+m[1]+" ") {
		t.Errorf("the drill did not restore the sealed snapshot %s:\n%s", m[1], out)
	}
	c.interrupt(sealed)
}

// firstLine is a file's first line.
func firstLine(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan()
	return s.Text()
}
