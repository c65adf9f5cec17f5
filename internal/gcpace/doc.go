// Package gcpace paces the Go collector for a long-running daemon whose
// memory matters more than its idle CPU: after every collection it sets
// the collector's goal to the live heap plus a bounded headroom (Min bytes
// or Fraction of the live heap, whichever is more), where the runtime's
// default (GOGC=100) lets the heap double past what it keeps.
//
// Why: hermesd's first snapshot of a brain of 50,000 files keeps about
// 27 MB live (the trees being built, the files' read records, the pack
// index, a blob id's encoding buffers) and, at GOGC=100, peaked at 91–95
// MiB of RSS; its whole snapshot allocates about 240 MB, so collecting
// every 8 MiB instead of every 27 MB costs a few dozen more collections of
// a few milliseconds each, not a measurable share of its 20 s. The same
// policy keeps a daemon of 1,000 agents starting up closer to its idle
// size. It is a pacing of the collector, not a limit: the live heap is
// what it is, and the heap may always reach it plus the headroom.
//
// It uses debug.SetGCPercent, never a memory limit: a soft limit below
// what the heap holds after a collection (fragmentation, spans not yet
// returned) makes the runtime collect back to back, which a daemon of
// 1,000 agents measured as 10% of a core while idle.
//
// An operator who sets GOGC in the environment keeps the runtime's own
// pacing (Start does nothing). The policy is process-wide: one owner
// (the `hermesd run` command, the bench tool) starts it and stops it.
package gcpace
