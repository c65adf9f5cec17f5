// Package watch turns filesystem events under brain directories into
// debounced batches of changed paths.
//
// One Hub serves the whole process: it owns a single inotify instance (one
// fsnotify watcher) and any number of per-directory subscriptions, each a
// Watcher with its own Ready, Take and Close. The kernel allows 128
// instances per user by default but hands out watches (one per directory)
// from a per-user pool shared by all of a user's instances, so a second
// instance would buy no watches; one instance and a fast reader is the whole
// design. Events are routed to their subscription by looking the event's
// path and each of its parents up in a map of roots: a few map probes per
// event, whatever the number of roots.
//
// fsnotify is not recursive, so every directory gets its own watch, and a
// directory that appears is watched and then scanned (files created before
// its watch was in place would otherwise be missed). Events are coalesced
// until the tree has been quiet for a while, or until the oldest pending
// change has waited the maximum lag. Batches that are not taken yet merge,
// so changes made while a snapshot runs become exactly one more batch.
//
// Lost events become a rescan. The kernel's event queue belongs to the
// instance, not to a directory, so one queue overflow makes every
// subscription of the hub report a rescan (and re-walk its tree to watch
// directories whose creation was lost).
//
// When a directory cannot be watched because a limit is reached
// (fs.inotify.max_user_watches, fs.inotify.max_user_instances, or
// HubOptions.MaxWatches), the hub says so once, naming the sysctl, its value
// and the command to raise it, and polls that directory instead: every
// HubOptions.PollInterval (jittered) it digests the tree's names, sizes,
// times and inodes and reports a rescan when the digest moved, and it tries
// to watch the directory again when room is likely. Idle, a hub with any
// number of subscriptions runs no timer and logs nothing.
package watch
