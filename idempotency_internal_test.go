package retryhttp

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewKeyUnique checks the keys cut from batches of random bytes: version
// 4 UUIDs of the RFC 4122 variant, all different, across several batches.
func TestNewKeyUnique(t *testing.T) {
	seen := map[uuid.UUID]bool{}
	for i := 0; i < 10*len(keyRand.buf)/16; i++ {
		u, err := newKey()
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(4), u.Version())
		assert.Equal(t, uuid.RFC4122, u.Variant())
		assert.False(t, seen[u], "key %v handed out twice", u)
		seen[u] = true
	}
}
