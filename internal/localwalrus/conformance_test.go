package localwalrus_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrustest"
)

// TestLocalwalrusConformance runs the Walrus conformance suite against
// this server: every documented request is answered as the real service
// answers it (internal/walrustest).
func TestLocalwalrusConformance(t *testing.T) {
	const maxBlob, maxQuilt = 4 << 10, 16 << 10
	walrustest.RunServer(t, func(t *testing.T) walrustest.Server {
		s, err := localwalrus.New(localwalrus.Config{Dir: t.TempDir(), MaxBodySize: maxBlob, MaxQuiltBodySize: maxQuilt})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s)
		t.Cleanup(hs.Close)
		return walrustest.Server{URL: hs.URL, MaxBlobBody: maxBlob, MaxQuiltBody: maxQuilt,
			Meet: func(c walrustest.Condition, publisher bool) {
				route := localwalrus.RouteAggregator
				if publisher {
					route = localwalrus.RoutePublisher
				}
				s.InjectNext(route, conditionFault(t, c))
			}}
	})
}

// conditionFault is the fault with which this server meets a condition.
func conditionFault(t *testing.T, c walrustest.Condition) localwalrus.Fault {
	switch c {
	case walrustest.Blocked:
		return localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: http.StatusUnavailableForLegalReasons}
	case walrustest.Internal:
		return localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: http.StatusInternalServerError}
	case walrustest.NoConfirmations:
		return localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: http.StatusGatewayTimeout}
	case walrustest.Unavailable:
		return localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: http.StatusServiceUnavailable}
	case walrustest.Overloaded:
		return localwalrus.Fault{Kind: localwalrus.FaultStatus, Status: http.StatusTooManyRequests}
	case walrustest.MarkedInvalid:
		return localwalrus.Fault{Kind: localwalrus.FaultMarkedInvalid}
	case walrustest.StoreFailed:
		return localwalrus.Fault{Kind: localwalrus.FaultStoreFailed}
	}
	t.Fatalf("no fault meets condition %q", c)
	return localwalrus.Fault{}
}
