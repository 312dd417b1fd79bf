package budget

import (
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is the configuration of retryhttp's default budget.
func testConfig() Config {
	return Config{Ratio: 0.1, Capacity: 10, MaxHosts: 1024, MaxWait: 2 * time.Second, MaxParked: 10_000}
}

// hostCount returns the number of hosts b tracks.
func hostCount(b *Budget) int {
	n := 0
	b.hosts.Each(func(hostmap.Key, *Host) bool { n++; return true })
	return n
}
