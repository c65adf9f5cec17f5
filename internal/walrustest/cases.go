package walrustest

import (
	"net/http"

	"github.com/hermesd/hermesd/internal/walrus"
)

// Op is an operation of the Walrus HTTP API.
type Op string

// The operations, by the route the real service serves them on.
const (
	OpStore            Op = "PUT /v1/blobs"
	OpStoreQuilt       Op = "PUT /v1/quilts"
	OpRead             Op = "GET /v1/blobs/{blob_id}"
	OpReadRange        Op = "GET /v1/blobs/{blob_id} with Range"
	OpReadPatch        Op = "GET /v1/blobs/by-quilt-patch-id/{quilt_patch_id}"
	OpReadByIdentifier Op = "GET /v1/blobs/by-quilt-id/{quilt_id}/{identifier}"
	OpListPatches      Op = "GET /v1/quilts/{quilt_id}/patches"
)

// publishes reports whether the publisher serves op (else the aggregator).
func (op Op) publishes() bool { return op == OpStore || op == OpStoreQuilt }

// Condition is a state of the network a request meets, which no request
// alone brings about: a blocked blob, a publisher that cannot gather
// confirmations, a blob marked invalid on chain.
type Condition string

// The conditions a server under test must be able to meet (Server.Meet).
const (
	// Blocked: the blob is on the service's deny list (451
	// FORBIDDEN_BLOB).
	Blocked Condition = "blocked"
	// Internal: an internal error (500 INTERNAL, reason INTERNAL_ERROR).
	Internal Condition = "internal"
	// NoConfirmations: the publisher timed out gathering the storage
	// nodes' confirmations (504 INSUFFICIENT_CONFIRMATIONS).
	NoConfirmations Condition = "no-confirmations"
	// Unavailable: the aggregator cannot reconstruct the blob now (503
	// BLOB_UNAVAILABLE).
	Unavailable Condition = "unavailable"
	// Overloaded: the service sheds load (429, plain text).
	Overloaded Condition = "overloaded"
	// MarkedInvalid: the blob is marked invalid on chain.
	MarkedInvalid Condition = "marked-invalid"
	// StoreFailed: the store fails in one of its phases (the error
	// variant of a store result).
	StoreFailed Condition = "store-failed"
)

// Ask is what makes a case's request other than its operation's plain
// one. The zero Ask is the plain request: a store for one epoch of the
// docs' example bytes (or quilt), a read of what is stored.
type Ask struct {
	// Query is a store's query string ("epochs=1" when empty).
	Query string
	// Again stores the same bytes a second time; the case is about the
	// answer to the second store.
	Again bool
	// TooLarge sends a body one byte over the publisher's limit.
	TooLarge bool
	// Accept is the read's Accept header: the client's
	// (application/octet-stream) when empty, none when "-".
	Accept string
	// Range is a read's Range header.
	Range string
	// Unknown asks for a blob, quilt or patch the server does not have.
	Unknown bool
	// Malformed asks for an id that is no id.
	Malformed bool
	// DuplicateParts sends a quilt with one identifier twice.
	DuplicateParts bool
	// Tags stores the docs' quilt with Walrus-native metadata (the
	// _metadata part) instead of the plain one.
	Tags bool
}

// Want is what the client must make of a documented answer.
type Want struct {
	// Value is the client's result, compared exactly (the fields a
	// transport fills, like Attempts, cleared): a walrus.StoreResult, a
	// walrus.QuiltResult, a []walrus.PatchInfo, or the bytes a read wrote.
	Value any
	// Err is the error the client must return (errors.Is), when it must.
	Err error
	// Status and Reason: the error is a *walrus.StatusError of this HTTP
	// status and ErrorInfo reason.
	Status int
	Reason string
	// Retried: the client tries again (RetryMax more times) rather than
	// giving up after one attempt.
	Retried bool
}

// World names the things a client case asks for: the docs' example blob
// and quilt, or a case's own (the OpenAPI examples name others).
type World struct {
	Content    []byte // the blob (and what a blob read returns)
	BlobID     string
	QuiltID    string
	Parts      []Part // the quilt's patches, in the order a store sends them
	PatchID    string // the patch a patch read asks for
	Identifier string // its identifier
}

// Part is one patch of a quilt.
type Part struct {
	Identifier string
	Data       []byte
	Tags       map[string]string
}

// Case is one exchange of the Walrus HTTP API: a request, the real
// service's answer to it, and what a client must make of that answer.
type Case struct {
	Name string
	Op   Op
	Ask  Ask
	// Meet is the network's state the request meets ("" for none).
	Meet Condition
	// Fixture names the documented answer (testdata/).
	Fixture string
	// Optional and Vary: see shape. TextPrefix: a plain-text answer is
	// compared up to this prefix (the rest names the request).
	Optional   []string
	Vary       []string
	TextPrefix string
	// Absent are headers the service's answer does not carry.
	Absent []string
	// ServerOnly: a client never sends this request (an id that is no
	// id, an open range, a quilt with one identifier twice).
	// ClientOnly: an answer the service's code does not give any more but
	// that its description documents (the OpenAPI's spelling, its
	// examples), which a client must still take.
	ServerOnly, ClientOnly bool
	// World is the client case's world; nil means Docs.
	World *World
	Want  Want
}

// The docs' examples (storing-blobs.mdx, quilt-http-apis.mdx).
const (
	docsBlobID    = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	docsQuiltID   = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo"
	docsPatchA    = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQDQAA" // another_walrus.jpg
	docsPatchW    = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoB0AB7Ag" // walrus.jpg
	docsObjectID  = "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50"
	docsQuiltObj  = "0xe6ac1e1ac08a603aef73a34328b0b623ffba6be6586e159a1d79c5ef0357bc02"
	docsTxDigest  = "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs"
	openAPIPatch  = "DJHLsgUoKQKEPcw3uehNQwuJjMu5a2sRdn8r-f7iWSAAC8Pw"
	openAPIQuilt  = "rkcHpHQrornOymttgvSq3zvcmQEsMqzmeUM1HSY4ShU"
	openAPIListed = "uIiEbhP2qgZYygEGxJX1GeB-rQATo2yufC2DCp7B4iA"
)

// Docs is the world of the docs' examples: the blob "some other string"
// the store example stores, and the quilt of walrus.jpg and
// another_walrus.jpg the quilt example stores (their bytes are not in
// the docs; these stand in).
var Docs = World{
	Content: []byte("some other string"),
	BlobID:  docsBlobID,
	QuiltID: docsQuiltID,
	Parts: []Part{
		{Identifier: "walrus.jpg", Data: []byte("[raw data]")},
		{Identifier: "another_walrus.jpg", Data: []byte("another walrus, 46")},
	},
	PatchID:    docsPatchW,
	Identifier: "walrus.jpg",
}

// docsTagged is the docs' quilt with Walrus-native metadata.
var docsTagged = []Part{
	{Identifier: "quilt-manual", Data: []byte("%PDF- a manual"), Tags: map[string]string{"creator": "walrus", "version": "1.0"}},
	{Identifier: "logo-2025", Data: []byte("\x89PNG a logo"), Tags: map[string]string{"type": "logo", "format": "png"}},
}

// The client's results for the docs' answers.
var (
	docsNewlyCreated = walrus.StoreResult{BlobID: docsBlobID, Size: 17, EndEpoch: 35, ObjectID: docsObjectID,
		RegisteredEpoch: 34, Cost: 132_300, EncodedLength: 66_034_000, StartEpoch: 34,
		ResourceOperation: "registerFromScratch", EpochsPaid: 1}
	docsAlreadyCertified = walrus.StoreResult{BlobID: docsBlobID, Size: 17, EndEpoch: 35, AlreadyCertified: true, TxDigest: docsTxDigest}
	docsQuiltPatches     = []walrus.StoredPatch{{Identifier: "walrus.jpg", PatchID: docsPatchW}, {Identifier: "another_walrus.jpg", PatchID: docsPatchA}}
	// The docs' quilt answer bills 72,040,000 encoded bytes and 12,075,000
	// FROST, right for the docs' two images laid out at 8-byte symbols;
	// for the 28 bytes the suite sends, Walrus's formula allows the
	// smallest quilt's 66,034,000 bytes, and the client records the bill
	// at that bound (walrus.StoreResult.Clamped).
	docsQuilt = walrus.QuiltResult{StoreResult: walrus.StoreResult{BlobID: docsQuiltID, Size: 1_782_224, EndEpoch: 104,
		ObjectID: docsQuiltObj, RegisteredEpoch: 103, Cost: 7_560_000, EncodedLength: 66_034_000, StartEpoch: 103,
		ResourceOperation: "registerFromScratch", EpochsPaid: 1,
		Clamped: "encoded length 72040000 > 66034000; encoded length × epochs 72040000 > 66034000; cost (FROST) 12075000 > 7560000"},
		Patches: docsQuiltPatches, Bytes: 28}
)

// Cases is the suite: every documented exchange, in the order of the
// docs (store, quilt store, reads, patch reads, the list of patches).
func Cases() []Case {
	storeErr := func(status int, reason string, retried bool) Want {
		w := Want{Status: status, Reason: reason, Retried: retried}
		switch status {
		case http.StatusNotFound:
			w.Err = walrus.ErrNotFound
		case http.StatusRequestEntityTooLarge:
			w.Err = walrus.ErrTooLarge
		case http.StatusRequestedRangeNotSatisfiable:
			w.Err = walrus.ErrInvalidRange
		}
		return w
	}
	openAPIPatchWorld := Docs
	openAPIPatchWorld.PatchID, openAPIPatchWorld.Identifier = openAPIPatch, "my-file.txt"
	openAPIQuiltWorld := Docs
	openAPIQuiltWorld.QuiltID, openAPIQuiltWorld.Identifier = openAPIQuilt, "my-file.txt"
	listedWorld := Docs
	listedWorld.QuiltID = openAPIListed
	return []Case{
		// PUT /v1/blobs
		{Name: "store/newly created", Op: OpStore, Fixture: "store-newly-created.http",
			Optional: []string{"sharedBlobObject"}, Want: Want{Value: docsNewlyCreated}},
		{Name: "store/newly created, OpenAPI spelling", Op: OpStore, Fixture: "store-newly-created-openapi.http",
			ClientOnly: true, Want: Want{Value: docsNewlyCreated}},
		{Name: "store/already certified", Op: OpStore, Ask: Ask{Query: "epochs=1&permanent=true", Again: true},
			Fixture: "store-already-certified.http", Want: Want{Value: docsAlreadyCertified}},
		{Name: "store/already certified, OpenAPI spelling", Op: OpStore, Fixture: "store-already-certified-openapi.http",
			ClientOnly: true, Want: Want{Value: docsAlreadyCertified}},
		{Name: "store/already certified, owned object", Op: OpStore, Ask: Ask{Again: true},
			Fixture: "store-already-certified-object.http",
			Want:    Want{Value: walrus.StoreResult{BlobID: docsBlobID, Size: 17, EndEpoch: 35, AlreadyCertified: true, ObjectID: docsObjectID}}},
		{Name: "store/marked invalid", Op: OpStore, Meet: MarkedInvalid, Fixture: "error-internal.http",
			Vary: []string{"detail"}, Want: storeErr(http.StatusInternalServerError, "INTERNAL_ERROR", true)},
		{Name: "store/marked invalid, as documented", Op: OpStore, Fixture: "store-marked-invalid.http",
			ClientOnly: true, Want: Want{Err: walrus.ErrMarkedInvalid}},
		{Name: "store/marked invalid, OpenAPI spelling", Op: OpStore, Fixture: "store-marked-invalid-openapi.http",
			ClientOnly: true, Want: Want{Err: walrus.ErrMarkedInvalid}},
		{Name: "store/error", Op: OpStore, Meet: StoreFailed, Fixture: "store-error.http",
			Vary: []string{"errorMsg"}, Want: Want{Retried: true}},
		{Name: "store/error, OpenAPI spelling", Op: OpStore, Fixture: "store-error-openapi.http",
			ClientOnly: true, Want: Want{Retried: true}},
		{Name: "store/400 deletable and permanent", Op: OpStore, Ask: Ask{Query: "deletable=true&permanent=true"},
			Fixture: "error-invalid-blob-persistence.http", Want: storeErr(http.StatusBadRequest, "INVALID_BLOB_PERSISTENCE", false)},
		{Name: "store/400 query", Op: OpStore, Ask: Ask{Query: "epochs=one"}, Fixture: "error-query.http",
			TextPrefix: "Failed to deserialize query string: ", Want: storeErr(http.StatusBadRequest, "", false)},
		{Name: "store/413", Op: OpStore, Ask: Ask{TooLarge: true}, Fixture: "error-body-limit.http",
			Want: storeErr(http.StatusRequestEntityTooLarge, "", false)},
		{Name: "store/429", Op: OpStore, Meet: Overloaded, Fixture: "error-overloaded.http",
			Want: storeErr(http.StatusTooManyRequests, "", true)},
		{Name: "store/451", Op: OpStore, Meet: Blocked, Fixture: "error-forbidden-blob.http",
			Want: storeErr(http.StatusUnavailableForLegalReasons, "FORBIDDEN_BLOB", false)},
		{Name: "store/500", Op: OpStore, Meet: Internal, Fixture: "error-internal.http", Vary: []string{"detail"},
			Want: storeErr(http.StatusInternalServerError, "INTERNAL_ERROR", true)},
		{Name: "store/500 plain text", Op: OpStore, Fixture: "error-internal-text.http", ClientOnly: true,
			Want: storeErr(http.StatusInternalServerError, "", true)},
		{Name: "store/504", Op: OpStore, Meet: NoConfirmations, Fixture: "error-insufficient-confirmations.http",
			Want: storeErr(http.StatusGatewayTimeout, "INSUFFICIENT_CONFIRMATIONS", true)},

		// PUT /v1/quilts
		{Name: "quilt/newly created", Op: OpStoreQuilt, Fixture: "quilt-newly-created.http",
			Optional: []string{"sharedBlobObject", "range"}, Want: Want{Value: docsQuilt}},
		{Name: "quilt/newly created, with ranges", Op: OpStoreQuilt, Fixture: "quilt-newly-created-range.http",
			Optional: []string{"sharedBlobObject"}, Want: Want{Value: docsQuilt}},
		{Name: "quilt/already certified", Op: OpStoreQuilt, Ask: Ask{Query: "epochs=1&permanent=true", Again: true},
			Fixture: "quilt-already-certified.http",
			Want: Want{Value: walrus.QuiltResult{StoreResult: walrus.StoreResult{BlobID: docsQuiltID, EndEpoch: 104,
				AlreadyCertified: true, TxDigest: docsTxDigest}, Patches: docsQuiltPatches, Bytes: 28}}},
		{Name: "quilt/marked invalid", Op: OpStoreQuilt, Meet: MarkedInvalid, Fixture: "quilt-marked-invalid.http",
			Want: Want{Err: walrus.ErrMarkedInvalid}},
		{Name: "quilt/error", Op: OpStoreQuilt, Meet: StoreFailed, Fixture: "quilt-error.http",
			Vary: []string{"errorMsg"}, Want: Want{Retried: true}},
		{Name: "quilt/400 one identifier twice", Op: OpStoreQuilt, Ask: Ask{DuplicateParts: true},
			Fixture: "error-malformed-request.http", Vary: []string{"message"}, ServerOnly: true},
		{Name: "quilt/413", Op: OpStoreQuilt, Ask: Ask{TooLarge: true}, Fixture: "error-body-limit.http",
			Want: storeErr(http.StatusRequestEntityTooLarge, "", false)},
		{Name: "quilt/451", Op: OpStoreQuilt, Meet: Blocked, Fixture: "error-forbidden-blob.http",
			Want: storeErr(http.StatusUnavailableForLegalReasons, "FORBIDDEN_BLOB", false)},
		{Name: "quilt/504", Op: OpStoreQuilt, Meet: NoConfirmations, Fixture: "error-insufficient-confirmations.http",
			Want: storeErr(http.StatusGatewayTimeout, "INSUFFICIENT_CONFIRMATIONS", true)},

		// GET /v1/blobs/{blob_id}
		{Name: "read/blob", Op: OpRead, Fixture: "read-blob.http", Want: Want{Value: Docs.Content}},
		{Name: "read/blob, no Accept", Op: OpRead, Ask: Ask{Accept: "-"}, Fixture: "read-blob-no-accept.http",
			Absent: []string{"Content-Type"}, ServerOnly: true},
		{Name: "read/range", Op: OpReadRange, Ask: Ask{Range: "bytes=2-9"}, Fixture: "read-range.http",
			Want: Want{Value: []byte("me other")}},
		{Name: "read/416 open range", Op: OpReadRange, Ask: Ask{Range: "bytes=2-"}, Fixture: "error-invalid-byte-range.http",
			ServerOnly: true},
		{Name: "read/416 range past the end", Op: OpReadRange, Ask: Ask{Range: "bytes=2-99"},
			Fixture: "error-invalid-byte-range.http", Vary: []string{"message"},
			Want: storeErr(http.StatusRequestedRangeNotSatisfiable, "INVALID_BYTE_RANGE", false)},
		{Name: "read/400 malformed blob id", Op: OpRead, Ask: Ask{Malformed: true}, Fixture: "error-blob-id.http",
			TextPrefix: "Invalid URL: ", ServerOnly: true},
		{Name: "read/404", Op: OpRead, Ask: Ask{Unknown: true}, Fixture: "error-blob-not-found.http",
			Want: storeErr(http.StatusNotFound, "BLOB_NOT_FOUND", false)},
		{Name: "read/451", Op: OpRead, Meet: Blocked, Fixture: "error-forbidden-blob.http",
			Want: storeErr(http.StatusUnavailableForLegalReasons, "FORBIDDEN_BLOB", false)},
		{Name: "read/500", Op: OpRead, Meet: Internal, Fixture: "error-internal.http", Vary: []string{"detail"},
			Want: storeErr(http.StatusInternalServerError, "INTERNAL_ERROR", true)},
		{Name: "read/503", Op: OpRead, Meet: Unavailable, Fixture: "error-blob-unavailable.http",
			Want: storeErr(http.StatusServiceUnavailable, "BLOB_UNAVAILABLE", true)},

		// Quilt patches
		{Name: "patch/by patch id", Op: OpReadPatch, Fixture: "read-patch.http", Want: Want{Value: Docs.Parts[0].Data}},
		{Name: "patch/by patch id, OpenAPI example", Op: OpReadPatch, Fixture: "read-patch-openapi.http", ClientOnly: true,
			World: &openAPIPatchWorld, Want: Want{Value: []byte("[raw data]")}},
		{Name: "patch/by quilt id and identifier", Op: OpReadByIdentifier, Fixture: "read-by-identifier.http",
			Want: Want{Value: Docs.Parts[0].Data}},
		{Name: "patch/by quilt id and identifier, OpenAPI example", Op: OpReadByIdentifier,
			Fixture: "read-by-identifier-openapi.http", ClientOnly: true, World: &openAPIQuiltWorld,
			Want: Want{Value: []byte("[raw data]")}},
		{Name: "patch/404 unknown identifier", Op: OpReadByIdentifier, Ask: Ask{Unknown: true},
			Fixture: "error-quilt-patch-not-found.http", Want: storeErr(http.StatusNotFound, "QUILT_PATCH_NOT_FOUND", false)},
		{Name: "patch/404 unknown patch id", Op: OpReadPatch, Ask: Ask{Unknown: true},
			Fixture: "error-quilt-patch-not-found.http", Want: storeErr(http.StatusNotFound, "QUILT_PATCH_NOT_FOUND", false)},
		{Name: "patch/451", Op: OpReadPatch, Meet: Blocked, Fixture: "error-forbidden-blob.http",
			Want: storeErr(http.StatusUnavailableForLegalReasons, "FORBIDDEN_BLOB", false)},

		// GET /v1/quilts/{quilt_id}/patches
		{Name: "list/patches", Op: OpListPatches, Fixture: "list-patches.http",
			Want: Want{Value: []walrus.PatchInfo{{Identifier: "another_walrus.jpg", PatchID: docsPatchA, Tags: map[string]string{}},
				{Identifier: "walrus.jpg", PatchID: docsPatchW, Tags: map[string]string{}}}}},
		{Name: "list/patches with tags", Op: OpListPatches, Ask: Ask{Tags: true}, Fixture: "list-patches-tags.http",
			Want: Want{Value: []walrus.PatchInfo{
				{Identifier: "logo-2025", PatchID: "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQACAA", Tags: map[string]string{"format": "png", "type": "logo"}},
				{Identifier: "quilt-manual", PatchID: "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAgADAA", Tags: map[string]string{"creator": "walrus", "version": "1.0"}}}}},
		{Name: "list/patches, OpenAPI example", Op: OpListPatches, Fixture: "list-patches-openapi.http", ClientOnly: true,
			World: &listedWorld, Want: Want{Value: []walrus.PatchInfo{
				{Identifier: "walrus-38.jpeg", PatchID: "uIiEbhP2qgZYygEGxJX1GeB-rQATo2yufC2DCp7B4iABAQANAA"},
				{Identifier: "walrus-39.avif", PatchID: "uIiEbhP2qgZYygEGxJX1GeB-rQATo2yufC2DCp7B4iABDQBnAA"}}}},
		{Name: "list/patches, OpenAPI example for the quilt it names", Op: OpListPatches, Fixture: "list-patches-openapi.http",
			ClientOnly: true, World: &openAPIQuiltWorld, Want: Want{Err: walrus.ErrProtocol}},
		{Name: "list/404", Op: OpListPatches, Ask: Ask{Unknown: true}, Fixture: "error-blob-not-found.http",
			Want: storeErr(http.StatusNotFound, "BLOB_NOT_FOUND", false)},
	}
}
