package snapshot_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// fidelityBrain adds to the fixture's brain one file under three names in
// two directories, a set-id program, a setgid and a sticky directory (the
// sticky one writable by everyone), symlinks (relative, absolute, out of
// the brain, to a directory), a brain directory kept 0700, and fixed
// times.
func fidelityBrain(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "shared", "tmp", "z"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(os.WriteFile(filepath.Join(dir, "a.md"), []byte("one file, three names\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "shared/x"), []byte("x"), 0o664))
	must(os.Link(filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")))
	must(os.Link(filepath.Join(dir, "a.md"), filepath.Join(dir, "z/c.md")))
	for _, l := range [][2]string{{"a.md", "lnk"}, {"/etc/passwd", "z/abs"}, {"../../../outside", "z/up"}, {"shared", "sh"}} {
		must(os.Symlink(l[0], filepath.Join(dir, l[1])))
	}
	for p, m := range map[string]fs.FileMode{"bin/tool": 0o755 | fs.ModeSetuid | fs.ModeSetgid,
		"shared": 0o775 | fs.ModeSetgid, "tmp": 0o777 | fs.ModeSticky, ".": 0o700} {
		must(os.Chmod(filepath.Join(dir, p), m))
	}
	stamp(t, dir)
}

// stamp gives every entry below dir, and dir last, a fixed time: the
// second i+1 after 1700000000, plus i nanoseconds.
func stamp(t *testing.T, dir string) {
	t.Helper()
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	slices.Reverse(paths) // children before their directory
	for i, p := range paths {
		when := time.Unix(1_700_000_001+int64(i), int64(i+1))
		ts := unix.NsecToTimespec(when.UnixNano())
		// The entry itself, a symlink's own time too.
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

// fidelity is a tree as a comparison sees it: per path, mode (with
// special bits), content, time (at prec, or "-" without times) and the
// first name of a file with several ("=a.md"); a symlink's target.
func fidelity(t *testing.T, root string, prec time.Duration) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[uint64]string{}
	var paths []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(paths)
	for _, rel := range paths {
		if rel == bundlelock.FileName || rel == snapshot.ReceiptsFile {
			continue // hermesd's own, rewritten by every snapshot
		}
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("%04o", fsys.UnixMode(fi.Mode()&fsys.Meta))
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(filepath.Join(root, rel))
			v = "-> " + target
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(filepath.Join(root, rel))
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
			if st := fi.Sys().(*syscall.Stat_t); st.Nlink > 1 {
				if f, ok := first[st.Ino]; ok {
					v += " =" + f
				} else {
					first[st.Ino] = rel
				}
			}
		}
		if prec > 0 {
			v += fmt.Sprintf(" @%d", fi.ModTime().UnixNano()/int64(prec))
		}
		out[rel] = v
	}
	return out
}

func sameFidelity(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for _, k := range sortedKeys(want, got) {
		if want[k] != got[k] {
			t.Errorf("%s: %s: want %q, got %q", what, k, want[k], got[k])
		}
	}
}

func sortedKeys(ms ...map[string]string) []string {
	var ks []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	return ks
}

// asRestored is what a restore gives of want: setuid and setgid stripped
// from files, o+w from directories (but the brain directory's, which
// intoPlace decides).
func asRestored(want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		file := strings.Count(v, " ") > 1
		if file && (v[0] == '2' || v[0] == '4' || v[0] == '6') {
			v = "0" + v[1:]
		}
		var m uint32
		if _, err := fmt.Sscanf(v, "%04o", &m); err == nil && !file && k != "." && m&0o002 != 0 {
			v = fmt.Sprintf("%04o", m&^0o002) + v[4:]
		}
		out[k] = v
	}
	return out
}

// TestFidelityEveryFormat takes a snapshot of the fidelity brain in every
// format hermesd writes and restores it: every name of the file is a hard
// link again, the directories keep their special bits, the program comes
// back without setuid and setgid and the restore lists it, the brain
// directory keeps its 0700; v3 restores every time to the nanosecond, the
// whole-blob formats (deterministic archives, no times) leave the
// restore's. The bundle hash is verified throughout.
func TestFidelityEveryFormat(t *testing.T) {
	t.Parallel()
	for _, format := range []snapshot.Format{snapshot.FormatV1, snapshot.FormatV2, snapshot.FormatV3} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			fidelityBrain(t, f.brain)
			p := f.pipeline("alpha.eth")
			p.Format, p.CacheDir, p.V1MaxSize = format, t.TempDir(), 1<<20
			before := fidelity(t, f.brain, time.Nanosecond)
			want := f.hash()
			res, err := p.Take(t.Context(), snapshot.Input{Want: want})
			if err != nil {
				t.Fatal(err)
			}

			start := time.Now().Add(-time.Second)
			target := filepath.Join(t.TempDir(), "brain")
			r, err := p.Restore(t.Context(), res.BlobID, target)
			if err != nil {
				t.Fatal(err)
			}
			links := 2
			if !fsys.Inodes {
				links = 0 // the portable walker cannot tell a file's names
			}
			if !r.Verified || r.BundleHash != want || r.Links != links || r.Symlinks != 4 || len(r.Skipped) != 0 {
				t.Errorf("restored %+v", r)
			}
			if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "kept tmp at mode 1775: the snapshot records 1777, writable by everyone") {
				t.Errorf("notes %q, want tmp kept without o+w", r.Notes)
			}
			if len(r.Stripped) != 1 || !strings.HasPrefix(r.Stripped[0], "bin/tool: setuid+setgid not restored (recorded 6755, restored 0755)") {
				t.Errorf("stripped %q", r.Stripped)
			}
			got := fidelity(t, target, time.Nanosecond)
			wantState := asRestored(before)
			if !fsys.Inodes {
				for k, v := range wantState {
					if i := strings.Index(v, " ="); i >= 0 {
						wantState[k] = v[:i] + v[i+strings.Index(v[i+1:], " ")+1:]
					}
				}
			}
			// The brain directory's time moved when the snapshot wrote the
			// lock and receipts into it: only its mode is compared here.
			got["."], wantState["."] = got["."][:4], wantState["."][:4]
			if format != snapshot.FormatV3 {
				// No times: everything is dated by the restore.
				for k, v := range got {
					i := strings.LastIndex(v, " @")
					if i < 0 {
						continue
					}
					var ns int64
					fmt.Sscanf(v[i+2:], "%d", &ns)
					if time.Unix(0, ns).Before(start) {
						t.Errorf("%s: %s dated %v, before the restore", format, k, time.Unix(0, ns))
					}
					got[k] = v[:i]
				}
				for k, v := range wantState {
					if i := strings.LastIndex(v, " @"); i >= 0 {
						wantState[k] = v[:i]
					}
				}
			}
			sameFidelity(t, string(format), wantState, got)
		})
	}
}

// TestRootModeNeverWidened: a restore into an existing, empty directory
// takes the snapshot's mode for it, except for permission bits the
// directory lacks: a brain kept 0700 does not come back world-readable,
// and the restore says so.
func TestRootModeNeverWidened(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.Chmod(f.brain, 0o750); err != nil {
		t.Fatal(err)
	}
	p := f.pipeline("alpha.eth")
	p.Format, p.CacheDir = snapshot.FormatV3, t.TempDir()
	res, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		existing fs.FileMode // 0: no directory
		want     fs.FileMode
		note     bool
	}{{0, 0o750, false}, {0o700, 0o700, true}, {0o755, 0o750, false}, {0o705, 0o700, true}} {
		target := filepath.Join(t.TempDir(), "brain")
		if tt.existing != 0 {
			if err := os.Mkdir(target, tt.existing); err != nil {
				t.Fatal(err)
			}
			os.Chmod(target, tt.existing)
		}
		r, err := p.Restore(t.Context(), res.BlobID, target)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(target)
		if err != nil || st.Mode().Perm() != tt.want || (len(r.Notes) > 0) != tt.note {
			t.Errorf("existing %04o: restored %v (%v), notes %q; want %04o, a note %v", tt.existing, st.Mode(), err, r.Notes, tt.want, tt.note)
		}
		if tt.note && !strings.Contains(r.Notes[0], "never widened") {
			t.Errorf("note %q", r.Notes[0])
		}
	}
}

// referenceBlob is a snapshot as the reference runtime takes it: its lock
// (written before the upload, naming the previous snapshot), its tar (GNU
// tar -c --numeric-owner -C dir .), in a v1 envelope.
func referenceBlob(t *testing.T, dir string, key cipher.Key, version int, parent string) []byte {
	t.Helper()
	return referenceBlobWith(t, dir, key, version, parent, func() { stamp(t, dir) })
}

// referenceBlobStamped is referenceBlob (version 1, no parent) with the
// brain's times set by stamp instead.
func referenceBlobStamped(t *testing.T, dir string, key cipher.Key, stamp func()) []byte {
	t.Helper()
	return referenceBlobWith(t, dir, key, 1, "", stamp)
}

func referenceBlobWith(t *testing.T, dir string, key cipher.Key, version int, parent string, stamp func()) []byte {
	t.Helper()
	h, err := hash.Dir(t.Context(), dir, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf("{\n  \"bundleHash\": %q,\n  \"version\": %d,\n  \"lastUpdated\": %d", h.Digest, version, 1700000000000+int64(version))
	if parent != "" {
		lock += fmt.Sprintf(",\n  \"walrusSnapshotBlobId\": %q", parent)
	}
	if err := os.WriteFile(filepath.Join(dir, bundlelock.FileName), []byte(lock+"\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	stamp()
	var out, stderr bytes.Buffer
	cmd := exec.Command(gnuTar(t), "-c", "--numeric-owner", "-C", dir, ".")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tar -c: %v: %s", err, stderr.String())
	}
	blob, err := cipher.SealV1(key, out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

// put stores a blob on the fixture's Walrus server and returns its id.
func (f *fixture) put(blob []byte) string {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodPut, f.srv.URL()+"/v1/blobs", bytes.NewReader(blob))
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("store: %s", resp.Status)
	}
	return localwalrus.BlobID(blob)
}

// TestFidelityReferenceSnapshot: a snapshot the reference runtime took of
// a brain with a file under three names restores (it used to fail the
// bundle hash, one name skipped), with the links, every time (to the
// second: GNU tar's), the directories' special bits, the program without
// set-id bits (listed), and the brain directory's 0700 from "./".
func TestFidelityReferenceSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fidelityBrain(t, f.brain)
	blob := referenceBlob(t, f.brain, f.key, 3, "")
	want := asRestored(fidelity(t, f.brain, time.Second))
	id := f.put(blob)
	target := filepath.Join(t.TempDir(), "brain")
	r, err := f.pipeline("alpha.eth").Restore(t.Context(), id, target)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified || r.Links != 2 || len(r.Stripped) != 1 || len(r.Skipped) != 0 || r.Symlinks != 4 {
		t.Errorf("restored %+v", r)
	}
	sameFidelity(t, "reference", want, fidelity(t, target, time.Second))
}

// TestFidelityZeroTimes: entries whose time is the epoch or under a
// second (1970-01-01) come back with that time, not the restore's: from a
// v3 snapshot (its brain directory's too), and from the reference's
// archive, which records times (GNU tar stores whole seconds: 0.5 s is
// the epoch there, as the reference restores it).
func TestFidelityZeroTimes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(f.brain, "old"), 0o755))
	must(os.WriteFile(filepath.Join(f.brain, "old/zero.md"), []byte("the epoch"), 0o644))
	must(os.WriteFile(filepath.Join(f.brain, "old/half.md"), []byte("half a second after"), 0o644))
	must(os.Symlink("zero.md", filepath.Join(f.brain, "old/lnk")))
	set := func(rel string, ns int64) {
		ts := unix.NsecToTimespec(ns)
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(f.brain, rel), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
	}
	times := map[string]int64{"old/zero.md": 0, "old/half.md": 500_000_000, "old/lnk": 0, "old": 0}

	p := f.pipeline("alpha.eth")
	p.Format, p.CacheDir = snapshot.FormatV3, t.TempDir()
	for rel, ns := range times {
		set(rel, ns)
	}
	set(".", 0)
	res, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	must(err)
	check := func(what, blob string, prec int64, root bool) {
		t.Helper()
		target := filepath.Join(t.TempDir(), "brain")
		if _, err := p.Restore(t.Context(), blob, target); err != nil {
			t.Fatal(err)
		}
		for rel, ns := range times {
			st, err := os.Lstat(filepath.Join(target, rel))
			if err != nil {
				t.Errorf("%s: %s not restored: %v", what, rel, err)
			} else if st.ModTime().UnixNano() != ns/prec*prec {
				t.Errorf("%s: %s restored at %v, recorded %v", what, rel, st.ModTime().UTC(), time.Unix(0, ns).UTC())
			}
		}
		if st, err := os.Stat(target); err != nil {
			t.Fatal(err)
		} else if root && st.ModTime().UnixNano() != 0 {
			t.Errorf("%s: the brain directory restored at %v, recorded the epoch", what, st.ModTime().UTC())
		}
	}
	rc, err := p.OpenV3(t.Context(), res.BlobID)
	must(err)
	if _, rootTime, _ := rc.Commit().RootMeta(); rootTime != 0 {
		t.Fatalf("the commit records the brain directory at %d, not the epoch", rootTime)
	}
	check("v3", res.BlobID, 1, true)

	// The reference's archive: referenceBlob re-stamps the brain, so
	// the times are set again after it wrote the lock.
	ref := referenceBlobStamped(t, f.brain, f.key, func() {
		for rel, ns := range times {
			set(rel, ns)
		}
		set(".", 0)
	})
	check("reference", f.put(ref), int64(time.Second), true)
}

// TestReferenceLineage: the reference runtime's lock inside each snapshot
// names the snapshot before it (walrusSnapshotBlobId); hermesd log shows
// that whole lineage, not only the newest entry, and still does once
// hermesd has restored the brain and snapshotted it on top.
func TestReferenceLineage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids, hashes []string
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(f.brain, "system.md"), []byte(fmt.Sprintf("state %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		parent := ""
		if i > 0 {
			parent = ids[i-1]
		}
		blob := referenceBlob(t, f.brain, f.key, i+1, parent)
		ids = append(ids, f.put(blob))
		hashes = append(hashes, f.hash().String())
	}
	p := f.pipeline("alpha.eth")
	check := func(head string, want []string) {
		t.Helper()
		es, err := p.History(t.Context(), head, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.BlobID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("history of %s: %q, want %q", head, got, want)
		}
		for i, e := range es {
			// hermesd's own lineage entries are listed unread ("unknown");
			// the ones the locks' chain gives were read.
			if j := slices.Index(ids, e.BlobID); j >= 0 && (e.BundleHash != hashes[j] || e.Status != "restorable" && e.Status != "unknown") {
				t.Errorf("entry %d: %+v, want bundle hash %s", i, e, hashes[j])
			}
		}
	}
	check(ids[2], []string{ids[2], ids[1], ids[0]})
	if es, _ := p.History(t.Context(), ids[2], 2); len(es) != 2 {
		t.Errorf("--limit 2: %d entries", len(es))
	}

	// hermesd restores the newest and snapshots on top (v1, as the
	// reference reads): its lock's lineage names the restored blob, whose
	// own lock goes on.
	target := filepath.Join(t.TempDir(), "brain")
	r, err := p.Restore(t.Context(), ids[2], target)
	if err != nil {
		t.Fatal(err)
	}
	lock := r.Lock.Clone()
	lock.Uploaded(bundlelock.LineageEntry{BlobID: ids[2], BundleHash: r.BundleHash.String(), CreatedAt: 1700000000000})
	if err := bundlelock.Write(filepath.Join(target, bundlelock.FileName), lock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "system.md"), []byte("hermesd's state\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.BrainDir, p.Format, p.V1MaxSize = target, snapshot.FormatV1, 1<<20
	h, err := hash.Dir(t.Context(), target, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Take(t.Context(), snapshot.Input{Want: h.Digest})
	if err != nil {
		t.Fatal(err)
	}
	check(res.BlobID, []string{res.BlobID, ids[2], ids[1], ids[0]})
}

// TestPublicRootNotRestored: a snapshot whose brain directory everyone
// may write to (hermesd's v3 commit, the reference runtime's "./") comes
// back without o+w, saying so, since a brain directory anyone may write
// to is refused before every snapshot (allow_unsafe_dirs allows it, and
// then the restore keeps it). The other bits are the snapshot's.
func TestPublicRootNotRestored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.Chmod(f.brain, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	p := f.pipeline("alpha.eth")
	p.Format, p.CacheDir = snapshot.FormatV3, t.TempDir()
	res, err := p.Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	v3 := res.BlobID
	ref := f.put(referenceBlob(t, f.brain, f.key, 1, ""))
	for _, blob := range []string{v3, ref} {
		for _, public := range []bool{false, true} {
			target := filepath.Join(t.TempDir(), "brain")
			r, err := p.RestoreWith(t.Context(), blob, target, snapshot.RestoreOptions{PublicRoot: public})
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			want, note := 0o775|fs.ModeSticky, true
			if public {
				want, note = 0o777|fs.ModeSticky, false
			}
			if got := st.Mode() & fsys.Meta; got != want || (len(r.Notes) > 0) != note ||
				note && !strings.Contains(r.Notes[0], "writable by everyone") {
				t.Errorf("%s, public %v: mode %v, notes %q; want %v", r.Format, public, got, r.Notes, want)
			}
		}
	}
}
