package main

import "errors"

// errPlatform refuses to run on Windows: hermesd's protections of secrets
// and brains (file modes, owners, O_NOFOLLOW, refusing symlinked paths)
// have no Windows meaning, and running without them would be worse than
// not running. WSL2 or a Linux container is the way there.
var errPlatform = errors.New("hermesd does not run on Windows (its file-mode, owner and no-follow protections are Unix-only); use WSL2 or a Linux container")
