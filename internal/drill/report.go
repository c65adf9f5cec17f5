package drill

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/walrus"
)

// WriteText prints the report for a human: what was drilled, one line per
// stage with its time, the notes and mismatches, and the verdict.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	how := "mode a: key + blob id, no ENS"
	if r.Mode == ModeB {
		how = "mode b: ENS pointer cold boot"
	}
	kind := "read-only (restored into a scratch directory)"
	if r.Destructive {
		kind = "DESTRUCTIVE (brain wiped and restored in place)"
	}
	name := r.Agent
	if r.ENSName != "" {
		name += " (" + r.ENSName + ")"
	}
	fmt.Fprintf(&b, "amnesia drill: %s, %s, %s\n", name, how, kind)
	fmt.Fprintf(&b, "  brain   %s\n", r.BrainDir)
	if r.BlobID != "" {
		fmt.Fprintf(&b, "  blob    %s (%s)", r.BlobID, walrus.FormatSize(r.BlobBytes))
		if r.Source != "" {
			fmt.Fprintf(&b, ", from %s", r.Source)
		}
		b.WriteString("\n")
	}
	if r.BundleHash != "" {
		var what string
		switch {
		case r.Snapshot == "snapshotted":
			what = "snapshot taken now"
		case r.Snapshot == "unchanged":
			what = "unchanged since its last snapshot"
		case !r.Taken.IsZero():
			what = "taken " + r.Taken.UTC().Format(time.RFC3339)
		default:
			what = "when taken not recorded"
		}
		fmt.Fprintf(&b, "  bundle  %s, version %d, %s\n", r.BundleHash, r.Version, what)
	}
	if r.ScratchDir != "" {
		fmt.Fprintf(&b, "  scratch %s (kept)\n", r.ScratchDir)
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STAGE\tTIME\tOK\tDETAIL")
	for _, s := range r.Stages {
		ok, detail := "ok", s.Detail
		if !s.OK {
			ok = "FAIL"
			if s.Error != "" {
				detail = s.Error // what went wrong, not what success would have shown
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, roundDur(s.Took), ok, detail)
	}
	fmt.Fprintf(tw, "  total\t%s\t\t\n", roundDur(r.Took))
	tw.Flush()

	if len(r.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	if len(r.MovedOn) > 0 {
		b.WriteString("\nchanged in the live brain since the snapshot (it moved on; not failures):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for i, m := range r.MovedOn {
			if i == maxListed {
				fmt.Fprintf(tw, "  … and %d more\n", len(r.MovedOn)-i)
				break
			}
			fmt.Fprintf(tw, "  %s\t%s\tlive: %s\trestored: %s\n", m.Kind, m.Path, orNone(m.Want), orNone(m.Got))
		}
		tw.Flush()
	}
	if len(r.Mismatches) > 0 {
		b.WriteString("\nmismatches (nothing explains them):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, m := range r.Mismatches {
			fmt.Fprintf(tw, "  %s\t%s\tlive: %s\trestored: %s\n", m.Kind, m.Path, orNone(m.Want), orNone(m.Got))
		}
		tw.Flush()
	}
	b.WriteString("\n")
	if r.Passed() {
		where := "scratch directory removed"
		switch {
		case r.Destructive:
			where = "brain back in place, byte-identical"
		case r.ScratchDir != "":
			where = "restored copy kept in " + r.ScratchDir
		}
		fmt.Fprintf(&b, "PASS: %d files (%s) restored byte for byte and mode for mode from %s; %s\n",
			r.Files, walrus.FormatSize(r.Bytes), source(r.Mode), where)
		if n := len(r.MovedOn); n > 0 {
			fmt.Fprintf(&b, "      the live brain moved on since the snapshot: %d entr%s changed after it\n", n, plural(n, "y", "ies"))
		}
	} else {
		fmt.Fprintf(&b, "FAIL: %s\n", r.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxListed bounds the moved-on entries the text report lists (--json
// has them all).
const maxListed = 20

func source(m Mode) string {
	if m == ModeB {
		return "chain + Walrus alone"
	}
	return "the key + blob id alone"
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
