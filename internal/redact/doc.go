// Package redact keeps the secrets of endpoint URLs out of errors and logs.
//
// Providers put API keys in a URL's path (https://mainnet.infura.io/v3/KEY),
// its query (wss://host/?apikey=KEY) or its userinfo, and Go's HTTP and RPC
// clients quote the full URL in their errors (`Post "https://…/v3/KEY":
// dial tcp …`); servers echo the path or the key alone ("invalid project id
// KEY"). Only an endpoint's origin, scheme://host[:port], is fit to show.
//
// URL and Origin reduce a URL to its origin. A Scrubber, built once from
// the configured endpoints, rewrites text and errors: every form of a whole
// endpoint URL becomes its origin, and its path, query, userinfo, path
// segments and query values become "…" where they appear alone.
//
// Invariants:
//   - Scrubbed text contains no configured secret part of at least
//     MinSecretPart bytes: a part is replaced wherever it starts, longest
//     candidate first, so no occurrence survives next to a replacement.
//   - A scrubbed error still matches (errors.Is, errors.As) what the
//     original matched, but does not unwrap to it, so walking the chain
//     meets no unscrubbed text.
//   - The package imports nothing of this module, so any package can use
//     it.
package redact
