// Package blackbox holds the black-box suites of the whole transport: fault
// matrices, hostile servers, storms, soaks and the closed-loop and
// cross-hop tests. They use retryhttp only through its public API, and the
// helpers they share with the root package's tests through
// internal/testkit.
package blackbox

import (
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/testkit"
)

// TestMain fails the run if any test leaves a goroutine behind
// (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }
