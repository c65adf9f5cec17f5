// Package ensname normalises ENS names (ENSIP-15) and writes the ones it
// rejects readably. It is a leaf: the configuration checks names with it
// without the ENS client and its chain libraries.
package ensname
