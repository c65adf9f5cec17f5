package walrus_test

import (
	"testing"

	"github.com/hermesd/hermesd/internal/walrustest"
)

// TestClientConformance serves the Walrus service's documented answers
// to this client and checks what it makes of each (internal/walrustest).
func TestClientConformance(t *testing.T) { walrustest.RunClient(t) }
