package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// ErrForeignOwner matches a file, directory or symbolic link hermesd would
// trust that belongs to neither the user hermesd runs as nor root: its
// owner could change it under hermesd at any time.
var ErrForeignOwner = errors.New("owned by another user")

// CheckOwner is the one ownership rule for what hermesd trusts (secret
// files and the links leading to them, the state directory): it must
// belong to the user hermesd runs as, or to root, who could change
// anything anyway (systemd credentials and Kubernetes Secret mounts are
// root's). fi is path's Lstat or Stat; where the platform has no owners
// it passes.
func CheckOwner(path string, fi fs.FileInfo) error {
	uid, ok := owner(fi)
	me, mok := euid()
	if !ok || !mok || uid == me || uid == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s belongs to uid %d; hermesd runs as uid %d and trusts only its own user's and root's files (chown it)",
		ErrForeignOwner, path, uid, me)
}

// maxLinks bounds the symbolic links CheckLinkOwners follows (Linux's
// limit for one lookup).
const maxLinks = 40

// CheckLinkOwners resolves p one component at a time, as opening it
// would, and holds every symbolic link met on the way to CheckOwner:
// whoever owns a link can point it at another file. Kubernetes mounts
// Secrets through root's links (key -> ..data/key), which pass. A
// component that does not exist ends the check (the open that follows
// fails on its own).
func CheckLinkOwners(p string) error {
	p, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	rest := strings.Split(p, "/")
	cur, links := "/", 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur holds no link: lexical is right
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if err := CheckOwner(next+" (a symbolic link)", fi); err != nil {
			return err
		}
		if links++; links > maxLinks {
			return &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return nil
}

// ErrUnsafeDir matches a brain, seed or state directory hermesd refuses
// unless the configuration allows it: a system directory, or a directory
// anyone may add files to. The errors' text says which and why, without
// the sentinel's: callers name the directory's role.
var ErrUnsafeDir = errors.New("unsafe directory")

type unsafeDirError struct{ msg string }

func (e *unsafeDirError) Error() string        { return e.msg }
func (e *unsafeDirError) Is(target error) bool { return target == ErrUnsafeDir }

func unsafeDirf(format string, args ...any) error {
	return &unsafeDirError{fmt.Sprintf(format, args...)}
}

// systemDirs are refused as a brain, seed or state directory: the roots
// of the operating system's hierarchy (Linux's and macOS's) and the
// directories that hold everyone's data. A directory of its own below
// them is fine (/var/lib/hermesd, /srv/agents/auditor, /run/hermesd,
// ~/agents/auditor), unless it is below one of systemTrees.
var systemDirs = []string{
	"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
	"/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/tmp",
	"/usr", "/usr/local", "/usr/local/bin", "/usr/local/etc", "/usr/local/lib", "/usr/local/share", "/usr/local/var",
	"/var", "/var/cache", "/var/lib", "/var/log", "/var/mail", "/var/opt", "/var/run", "/var/spool", "/var/tmp",
	"/Applications", "/Library", "/System", "/Users", "/Volumes", "/cores",
	"/private", "/private/etc", "/private/tmp", "/private/var", "/opt/homebrew",
}

// secretTrees are refused with everything below them, for every
// directory: the kernel's interfaces (a brain in /proc would snapshot the
// kernel's view, a state directory in /dev sit among device nodes) and
// the system's configuration and boot files (/etc holds /etc/shadow and
// the host keys).
var secretTrees = []string{"/boot", "/dev", "/etc", "/proc", "/sys", "/private/etc"}

// osTrees are refused with everything below them for a directory hermesd
// writes (a brain or state directory): what the operating system and its
// package manager own. /usr/local, the local administrator's (and
// Homebrew's), is the exception below /usr. A seed directory, which
// hermesd only reads, may lie there (/usr/share/NAME/seed).
var (
	osTrees     = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/System"}
	osTreeSpare = []string{"/usr/local"}
)

// resolvedSystem are the lists above with each entry also in its resolved
// form on this machine (/bin -> /usr/bin with a merged /usr; /etc ->
// /private/etc on macOS; /home -> /var/home on Fedora Silverblue).
var resolvedSystem = sync.OnceValue(func() [4][]string {
	both := func(l []string) []string {
		out := slices.Clone(l)
		for _, d := range l {
			if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
				out = append(out, r)
			}
		}
		return out
	}
	return [4][]string{both(systemDirs), both(secretTrees), both(osTrees), both(osTreeSpare)}
})

// SystemDir returns the system directory the absolute path p is, or lies
// below (for one of the trees the system owns), as given or with its
// symbolic links resolved as far as it exists; "" when it is none.
// source relaxes the rule for a directory hermesd only reads: it may lie
// below /usr, /bin, /sbin and /lib (not /etc, /boot, /dev, /proc, /sys).
func SystemDir(p string, source bool) string {
	l := resolvedSystem()
	dirs, secret, ostrees, spare := l[0], l[1], l[2], l[3]
	for _, c := range []string{filepath.Clean(p), resolve(p)} {
		for _, d := range dirs {
			if c == d {
				return d
			}
		}
		if t := under(c, secret); t != "" {
			return t
		}
		if t := under(c, ostrees); t != "" && !source && under(c, spare) == "" {
			return t
		}
	}
	return ""
}

// under returns the entry of l that c is or lies below.
func under(c string, l []string) string {
	for _, t := range l {
		if c == t || strings.HasPrefix(c, t+"/") {
			return t
		}
	}
	return ""
}

// resolve returns p cleaned, with the symbolic links of its longest
// existing prefix resolved.
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if parent := filepath.Dir(cur); parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// CheckSystemDir fails with ErrUnsafeDir when p, a directory hermesd
// writes (a brain or state directory), is a system directory (SystemDir):
// hermesd as root would snapshot /etc/shadow from a brain in /etc, and
// write its lock and receipts there.
func CheckSystemDir(p string) error { return checkSystemDir(p, false) }

// CheckSystemSource is CheckSystemDir for a directory hermesd only reads
// (a seed directory): it may lie below /usr, /bin, /sbin and /lib.
func CheckSystemSource(p string) error { return checkSystemDir(p, true) }

func checkSystemDir(p string, source bool) error {
	d := SystemDir(p, source)
	switch {
	case d == "":
		return nil
	case d == filepath.Clean(p):
		return unsafeDirf("%s is a system directory; hermesd needs a directory of its own", p)
	}
	return unsafeDirf("%s is or lies in %s, a system directory; hermesd needs a directory of its own", p, d)
}

// CheckNotHome fails with ErrUnsafeDir when p is, or resolves to, the
// home directory of the user hermesd runs as ($HOME): a brain or seed
// directory there would put ~/.ssh and everything else of the user's in
// its snapshots. (A state directory may be a home: a system user's home is
// often its state directory, as in the useradd line of the systemd unit.)
func CheckNotHome(p string) error {
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return nil
	}
	if h := filepath.Clean(home); filepath.Clean(p) == h || resolve(p) == resolve(h) {
		return unsafeDirf("%s is the home directory of the user hermesd runs as; give the agent a directory of its own", p)
	}
	return nil
}

// CheckNotPublic fails with ErrUnsafeDir when everyone may add files to
// the directory p: when p itself is writable by others (the sticky bit
// does not help: anyone may still add files), or one of its parents is
// without the sticky bit (anyone could rename p away and put another
// directory in its place). Files planted in a brain or seed directory end
// up in its snapshots. Parts of p that do not exist pass.
func CheckNotPublic(p string) error {
	p = filepath.Clean(p)
	for cur := p; ; cur = filepath.Dir(cur) {
		fi, err := os.Stat(cur)
		if err == nil && fi.IsDir() && fi.Mode().Perm()&0o002 != 0 {
			switch {
			case cur == p:
				return unsafeDirf("%s is writable by everyone (mode %04o), so anyone could add files to its snapshots; run chmod o-w %s",
					p, modeBits(fi.Mode()), p)
			case fi.Mode()&fs.ModeSticky == 0:
				return unsafeDirf("%s lies in %s, which everyone may write to (mode %04o), so anyone could put another directory in its place; run chmod +t or o-w %s",
					p, cur, modeBits(fi.Mode()), cur)
			}
		}
		if parent := filepath.Dir(cur); parent == cur {
			return nil
		}
	}
}

// modeBits is a mode as chmod writes it (sticky bit included).
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}
