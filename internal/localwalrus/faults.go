package localwalrus

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Route classifies requests for fault targeting and statistics.
type Route uint8

const (
	RoutePublisher  Route = 1 << iota // PUT /v1/blobs, PUT /v1/quilts
	RouteAggregator                   // GET /v1/blobs/..., GET /v1/quilts/{id}/patches
	RouteOther                        // everything else
)

func (r Route) String() string {
	switch r {
	case RoutePublisher:
		return "publisher"
	case RouteAggregator:
		return "aggregator"
	case RouteOther:
		return "other"
	}
	return "mixed"
}

func routeOf(r *http.Request) Route {
	switch {
	case r.Method == http.MethodPut && (r.URL.Path == "/v1/blobs" || r.URL.Path == "/v1/quilts"):
		return RoutePublisher
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(len(r.URL.Path) > len("/v1/blobs/") && r.URL.Path[:len("/v1/blobs/")] == "/v1/blobs/" ||
			len(r.URL.Path) > len("/v1/quilts/") && r.URL.Path[:len("/v1/quilts/")] == "/v1/quilts/"):
		return RouteAggregator
	}
	return RouteOther
}

// FaultKind is what an injected fault does.
type FaultKind uint8

const (
	FaultNone FaultKind = iota
	// FaultStatus answers with Fault.Status (500, 503, 504, 429, ...) and
	// the body the real service would send, before reading the request.
	FaultStatus
	// FaultReset resets the connection (TCP RST). A read gets the headers
	// and the first CutAt body bytes first; a store's body is read and
	// discarded, nothing is stored, and no answer is sent.
	FaultReset
	// FaultTruncate promises the full Content-Length, sends CutAt body
	// bytes and closes the connection. A store stores the blob first, so
	// only its answer is lost.
	FaultTruncate

	// The faults below are a hostile server's, not a flaky one's; they are
	// never in DefaultFaultKinds.

	// FaultEndless answers 200 with a body that never ends (until the
	// client hangs up, or after Fault.Length bytes): blob-like bytes from
	// the aggregator, an endless JSON document from the publisher (which
	// reads and discards the upload first and stores nothing). With
	// Fault.Length > 0 the answer announces that Content-Length (say
	// 1 TiB); otherwise it is chunked.
	FaultEndless
	// FaultLyingLength answers like the real service, with the real
	// status, headers and body, except that Content-Length claims
	// Fault.Length bytes (0 means half the true length, so a short body
	// looks complete). The body stops at the claim or at its true end,
	// whichever is first; a claim beyond the true end leaves the body
	// short and the connection closed.
	FaultLyingLength
	// FaultRedirect answers Fault.Status (a 3xx; 0 means 307) with a
	// Location on another origin: Fault.Location (scheme://host:port)
	// plus the request's path and query, or by default this server under
	// its other loopback name (127.0.0.1 and localhost swapped). Nothing
	// is read or stored.
	FaultRedirect

	// The faults below are the network's, answered as the real publisher
	// answers them; they are never in DefaultFaultKinds either. The upload
	// is read and laid out, and nothing is stored.

	// FaultMarkedInvalid: the blob is marked invalid on chain. A blob
	// store gets 500 (the publisher turns the markedInvalid result into an
	// internal error); a quilt store gets 200 with the markedInvalid
	// variant and no stored patches.
	FaultMarkedInvalid
	// FaultStoreFailed: the store fails in a phase of its own (the error
	// variant of a store result, status 200): {"error": {blobId,
	// failurePhase, errorMsg}}, a quilt's with no stored patches.
	FaultStoreFailed
)

var faultKindNames = [...]string{"none", "status", "reset", "truncate", "endless", "lying-length", "redirect",
	"marked-invalid", "store-failed"}

func (k FaultKind) String() string {
	if int(k) < len(faultKindNames) {
		return faultKindNames[k]
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is one injected failure.
type Fault struct {
	Kind       FaultKind
	Status     int    // FaultStatus; FaultRedirect (3xx, 0 means 307)
	RetryAfter string // FaultStatus: Retry-After header value, "" for none
	CutAt      int64  // FaultReset/FaultTruncate: body bytes sent first; negative means half
	// Length is the Content-Length claimed: FaultEndless (0: none, the
	// body is chunked) and FaultLyingLength (0: half the true length).
	Length int64
	// Location is FaultRedirect's target origin (scheme://host:port); ""
	// means this server under its other loopback name.
	Location string
	// Delay holds the request this long before anything else happens (a
	// slow server); it combines with any Kind, including FaultNone.
	Delay time.Duration
}

// Faults switches random fault injection.
type Faults struct {
	// Rate is the fraction (0..1) of targeted requests that fail.
	Rate float64
	// Kinds are the faults to pick from, uniformly. Empty means 500, 503
	// (with Retry-After: 0), 504, 429 (with Retry-After: 0), reset and
	// truncate.
	Kinds []Fault
	// Target selects routes (RoutePublisher|RouteAggregator); 0 means both.
	Target Route
	// Latency is added to every targeted request.
	Latency time.Duration
	// Seed makes the sequence of faults reproducible.
	Seed uint64
}

// DefaultFaultKinds is the mix used when Faults.Kinds is empty.
var DefaultFaultKinds = []Fault{
	{Kind: FaultStatus, Status: http.StatusInternalServerError},
	{Kind: FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "0"},
	{Kind: FaultStatus, Status: http.StatusGatewayTimeout},
	{Kind: FaultStatus, Status: http.StatusTooManyRequests, RetryAfter: "0"},
	{Kind: FaultReset, CutAt: -1},
	{Kind: FaultTruncate, CutAt: -1},
}

type faultState struct {
	mu     sync.Mutex
	f      Faults
	rng    *rand.Rand
	script map[Route][]Fault
	// replaced is closed when f is replaced: requests still held by its
	// Latency go on at once (a network that recovers lets them through).
	replaced chan struct{}
}

func (fs *faultState) set(f Faults) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.replaced != nil {
		close(fs.replaced)
	}
	fs.replaced = make(chan struct{})
	if f.Target == 0 {
		f.Target = RoutePublisher | RouteAggregator
	}
	if len(f.Kinds) == 0 {
		f.Kinds = DefaultFaultKinds
	}
	fs.f = f
	fs.rng = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
}

// pick decides the fault for one request of route r, and how long it
// waits first: its delay, cut short when the configuration is replaced
// (nil: not cut short, for a scripted fault).
func (fs *faultState) pick(r Route) (Fault, time.Duration, <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if q := fs.script[r]; len(q) > 0 {
		fs.script[r] = q[1:]
		return q[0], q[0].Delay, nil
	}
	if fs.f.Target&r == 0 {
		return Fault{}, 0, nil
	}
	if fs.f.Rate > 0 && fs.rng.Float64() < fs.f.Rate {
		f := fs.f.Kinds[fs.rng.IntN(len(fs.f.Kinds))]
		return f, fs.f.Latency + f.Delay, fs.replaced
	}
	return Fault{}, fs.f.Latency, fs.replaced
}

// SetFaults replaces the random fault configuration; safe at any time.
// Requests waiting out the old configuration's Latency or Delay go on at
// once, to the fault they were given.
func (s *Server) SetFaults(f Faults) { s.faults.set(f) }

// InjectNext queues faults for the next requests of route r, in order,
// ahead of any random ones. A Fault{} in the queue lets one request pass.
func (s *Server) InjectNext(r Route, faults ...Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.script == nil {
		s.faults.script = make(map[Route][]Fault)
	}
	s.faults.script[r] = append(s.faults.script[r], faults...)
}

// RequestInfo describes one finished request.
type RequestInfo struct {
	Route    Route
	Method   string
	Path     string
	RawQuery string
	Header   http.Header // the request's headers
	Range    string      // the request's Range header
	Status   int         // status sent; 0 if the connection was reset before any
	Fault    FaultKind   // the fault applied, if any
	BlobID   string      // stored or requested blob (a quilt's, for its patches), when known
	PatchID  string      // the quilt patch read, when known
	BytesIn  int64       // request body bytes read
	BytesOut int64       // response body bytes sent
	// Start and End are wall-clock times (time.Now, not Config.Now), for
	// checking how far apart a client's retries were.
	Start time.Time
	End   time.Time
}

// Stats counts requests by route and status.
type Stats struct {
	Requests int
	ByRoute  map[Route]map[int]int // status 0 = reset before a status
	Faults   map[FaultKind]int
}

type statsState struct {
	mu sync.Mutex
	s  Stats
}

func (ss *statsState) add(info *RequestInfo) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.s.ByRoute == nil {
		ss.s.ByRoute = make(map[Route]map[int]int)
		ss.s.Faults = make(map[FaultKind]int)
	}
	ss.s.Requests++
	m := ss.s.ByRoute[info.Route]
	if m == nil {
		m = make(map[int]int)
		ss.s.ByRoute[info.Route] = m
	}
	m[info.Status]++
	if info.Fault != FaultNone {
		ss.s.Faults[info.Fault]++
	}
}

// Stats returns a copy of the request counters.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := Stats{Requests: s.stats.s.Requests, ByRoute: make(map[Route]map[int]int), Faults: make(map[FaultKind]int)}
	for r, m := range s.stats.s.ByRoute {
		c := make(map[int]int, len(m))
		for k, v := range m {
			c[k] = v
		}
		out.ByRoute[r] = c
	}
	for k, v := range s.stats.s.Faults {
		out.Faults[k] = v
	}
	return out
}
