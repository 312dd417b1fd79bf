package retryhttptest

import (
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/doccheck"
)

// TestDocNumbers holds every number in the doc comments of the package's
// exported API to the value it states (internal/doccheck): here, none
// states a constant of the package.
func TestDocNumbers(t *testing.T) {
	doccheck.CheckNumbers(t, ".", [][2]string{
		{"Reset", "HTTP/2"},
	})
}
