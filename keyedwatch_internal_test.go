package retryhttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanHeaderCanonicalWinsInAnyOrder checks the one walk of a header
// map (scanHeader) whatever the order the map is walked in: a name under
// its canonical spelling wins over the same name otherwise spelled.
func TestScanHeaderCanonicalWinsInAnyOrder(t *testing.T) {
	for i := 0; i < 200; i++ { // map order is random: many walks
		f := scanHeader(http.Header{"Idempotency-Key": {""}, "idempotency-key": {"k"}, "IDEMPOTENCY-KEY": {"k"},
			"X-Idempotency-Key": {"k"}, "x-idempotency-key": {""}, "retry-attempt": {"2"}, "Content-Type": {"a"}})
		require.True(t, f.hasKey && f.hasXKey && f.attempt)
		require.False(t, f.key, "the canonical Idempotency-Key is empty")
		require.True(t, f.xKey, "the canonical X-Idempotency-Key is not")
	}
}
