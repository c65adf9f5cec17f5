package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/repo"
)

func runDiff(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "diff", "diff [-config FILE] [--json] AGENT A B",
		`Show what changed in an agent's brain between two v3 snapshots, from their
trees alone: no file content is downloaded. A and B are what 'hermesd log'
lists: N (0 = the latest, 1 = its parent), a blob id, or 0x and a bundle
hash prefix. One line per path:

  A path   added in B
  D path   removed in B
  M path   content or mode changed (old and new size and mode follow)

bundle.lock.json and receipts.ndjson are kept beside the brain's tree and are
not compared. A blob id may start with '-': put -- before A and B then.`)
	cfgPath := configFlag(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usageErrorf("diff needs AGENT A B")
	}
	h, err := openHistory(ctx, env, *cfgPath, pos[0])
	if err != nil {
		return err
	}
	defer h.Close()
	var readers [2]*repo.Reader
	for i, sel := range pos[1:] {
		e, err := h.resolve(ctx, sel)
		if err != nil {
			return err
		}
		if readers[i], err = h.pipe.OpenV3(ctx, e.BlobID); err != nil {
			return fmt.Errorf("snapshot %s (%s): %w", sanitize(sel), sanitize(e.BlobID), err)
		}
	}
	a, b := readers[0], readers[1]
	var changes []diffLine
	err = repo.Diff(ctx, a, a.Commit().Root, b, b.Commit().Root, func(c repo.Change) error {
		changes = append(changes, diffLineOf(c))
		return nil
	})
	if err != nil {
		return err
	}
	if *jsonOut {
		return json.NewEncoder(env.stdout).Encode(map[string]any{
			"agent": h.agent.ID, "a": a.HeadBlobID(), "b": b.HeadBlobID(),
			"aBundleHash": a.Commit().BundleHash, "bBundleHash": b.Commit().BundleHash, "changes": changes,
		})
	}
	for _, c := range changes {
		// Paths come from the trees, which the agent's key vouches for,
		// but a snapshot is still outside data: no escape sequences.
		switch c.Kind {
		case "M":
			fmt.Fprintf(env.stdout, "M %s\t%s -> %s\n", sanitize(c.Path), sanitize(c.Old.describe()), sanitize(c.New.describe()))
		default:
			fmt.Fprintf(env.stdout, "%s %s\n", c.Kind, sanitize(c.Path))
		}
	}
	return nil
}

type diffLine struct {
	Path string     `json:"path"`
	Kind string     `json:"kind"` // A, D or M
	Old  *diffEntry `json:"old,omitempty"`
	New  *diffEntry `json:"new,omitempty"`
}

type diffEntry struct {
	Type   string `json:"type"` // file, dir or symlink
	Mode   string `json:"mode"` // permission and special bits, octal ("" for a hard link: its file's; a symlink: none)
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`   // a hard link: the path of the file it is another name of
	Target string `json:"target,omitempty"` // a symlink: its target, verbatim
}

func (e *diffEntry) describe() string {
	switch {
	case e.Type == "dir":
		return "dir " + e.Mode
	case e.Type == "symlink":
		return "symlink -> " + e.Target
	case e.Link != "":
		return fmt.Sprintf("hard link to %s, %d bytes", e.Link, e.Size)
	}
	return fmt.Sprintf("%s %d bytes", e.Mode, e.Size)
}

func entryOf(e *repo.Entry) *diffEntry {
	if e == nil {
		return nil
	}
	d := &diffEntry{Type: "dir", Mode: fmt.Sprintf("%04o", fsys.UnixMode(e.Mode))}
	switch e.Type {
	case repo.EntrySymlink:
		return &diffEntry{Type: "symlink", Target: e.Link}
	case repo.EntryFile:
		d.Type, d.Size, d.SHA256 = "file", e.Size, hex.EncodeToString(e.SHA256[:])
	}
	if e.Link != "" {
		d.Mode, d.Link = "", e.Link
	}
	return d
}

func diffLineOf(c repo.Change) diffLine {
	kind := "M"
	switch c.Kind {
	case repo.Added:
		kind = "A"
	case repo.Removed:
		kind = "D"
	}
	return diffLine{Path: c.Path, Kind: kind, Old: entryOf(c.Old), New: entryOf(c.New)}
}
