// Package walrustest is the conformance suite of the Walrus HTTP API:
// one table of the API's exchanges as the real service answers them,
// run against a server (localwalrus) and against the client
// (internal/walrus) alike, so that the two share a written-down API
// rather than hope. Only tests import it.
//
// Each Case is an operation (store a blob or a quilt; read a blob, a
// range, a patch by its id or by quilt id and identifier; list a quilt's
// patches), what makes its request special, the state of the network it
// meets (a blocked blob, a publisher without confirmations, a blob marked
// invalid, ...), and the service's documented answer: a fixture in
// testdata/, taken from the Walrus docs' examples, the publisher's and
// aggregator's OpenAPI descriptions and the service's source
// (testdata/README.md names the source of each, and where they
// disagree).
//
// RunServer sends each case's request to a fresh server (after storing
// what it reads) and compares the answer with the documented one: the
// status, the headers the service sends (ETag, Cache-Control,
// Content-Range, Content-Type, X-Quilt-Patch-Identifier), the JSON's
// structure and fixed strings, and what the request implies (the size
// stored, the epochs, the persistence). Ids are compared by shape and by
// consistency, never by value: a blob id is 43 characters of URL-safe
// base64, a patch id its quilt's id followed by the patch's bytes; the id
// a store returned reads back the bytes stored, a second store of the
// same bytes answers with the same id, and a later answer repeats an id
// wherever the documented one does. So a server that computes ids
// another way (localwalrus's content addresses, or the network's RedStuff
// ids) passes alike.
//
// RunClient serves each documented answer verbatim from a loopback
// server, in answer to the request the client makes for the case's
// operation, and checks the request (method, path, query, Range, once or
// retried) and what the client makes of the answer: the exact values of
// the docs' examples, or the error (its sentinel, its HTTP status and
// reason) and whether it is retried. Answers in the OpenAPI
// description's spelling, which the service does not send, are the
// client's cases only; requests a client never makes (an id that is no
// id, an open range) are the server's only.
//
// Bounds: an answer is read up to 4 MiB; bodies sent are at most a byte
// over the server's configured limits.
package walrustest
