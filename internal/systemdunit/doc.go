// Package systemdunit reads the systemd units hermesd ships (configs/ and
// deploy/), so that their tests can check what a unit sets: every value
// of every key, in file order (a key may repeat). It reads what our units
// use — keys, comments, section headers — not the whole format: no
// line continuations and no specifiers, which a malformed line reports.
package systemdunit
