// Command destinations shows one Transport applying a different retry
// policy to each destination, read from a JSON file and reloaded while it
// runs:
//
//	go run ./examples/destinations
//
// It starts four backends on loopback that fail every request (legacy with
// 500, the others with 503) and gives them the names of destinations.json,
// which ships beside this file: a dialer stands in for DNS. It copies the
// file to a temporary directory, loads it, sends one GET to each backend
// and prints how many attempts each one saw: payments is never retried,
// search once, legacy's 500 is retried because its policy lists it, and any
// other host gets the file's defaults. Then it edits the file (payments now
// gets one retry), reloads it, and sends the GETs again; finally it writes a
// broken file, whose reload is refused while the policies in place stay.
// It takes well under a second and exits with status 1 if a count is not the
// expected one.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
)

//go:embed destinations.json
var destinationsJSON string

type backend struct {
	name, url string
	srv       *httptest.Server
	attempts  atomic.Int64
}

func main() {
	backends := []*backend{
		{name: "payments", url: "http://payments.internal/charge"},
		{name: "search", url: "http://eu.search.internal/q"},
		{name: "legacy", url: "http://legacy.internal:8080/report"},
		{name: "other", url: "http://inventory.internal/items"},
	}
	addrs := map[string]string{} // host name -> loopback address
	for _, b := range backends {
		status := http.StatusServiceUnavailable
		if b.name == "legacy" {
			status = http.StatusInternalServerError
		}
		b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.attempts.Add(1)
			w.WriteHeader(status)
		}))
		defer b.srv.Close()
		host := strings.Split(strings.TrimPrefix(b.url, "http://"), "/")[0]
		name, _, _ := strings.Cut(host, ":")
		addrs[name] = b.srv.Listener.Addr().String()
	}

	// The file, where an operator would keep it.
	dir, err := os.MkdirTemp("", "destinations")
	check(err)
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "destinations.json")
	check(os.WriteFile(file, []byte(destinationsJSON), 0o600))

	var table destinations.Table
	check(table.LoadFile(file))
	tr := retryhttp.New(
		retryhttp.WithTransport(dialByName(addrs)),
		retryhttp.WithPolicyFunc(table.Policy),
	)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	fmt.Println("policies from", filepath.Base(file)+":")
	round(client, backends, map[string]int64{"payments": 1, "search": 2, "legacy": 3, "other": 3})

	// Reload while the transport is in use: payments now gets one retry.
	edited := strings.Replace(destinationsJSON,
		`"host": "payments.internal", "maxRetries": 0`, `"host": "payments.internal", "maxRetries": 1`, 1)
	if edited == destinationsJSON {
		fail("destinations.json no longer holds the line this example edits")
	}
	check(os.WriteFile(file, []byte(edited), 0o600))
	check(table.LoadFile(file))
	fmt.Println("\nafter editing payments to maxRetries 1 and reloading:")
	round(client, backends, map[string]int64{"payments": 2, "search": 2, "legacy": 3, "other": 3})

	// A broken file is refused; the policies in place stay.
	broken := strings.Replace(edited, `"base": "5ms"`, `"base": "-5ms"`, 1)
	check(os.WriteFile(file, []byte(broken), 0o600))
	err = table.LoadFile(file)
	if err == nil {
		fail("the broken file was accepted")
	}
	fmt.Println("\nreloading a broken file fails, and changes nothing:")
	fmt.Println(" ", strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
	round(client, backends, map[string]int64{"payments": 2, "search": 2, "legacy": 3, "other": 3})
}

// round sends one GET to each backend and prints the attempts each saw.
func round(client *http.Client, backends []*backend, want map[string]int64) {
	for _, b := range backends {
		b.attempts.Store(0)
		res, err := client.Get(b.url)
		check(err)
		res.Body.Close()
		got := b.attempts.Load()
		fmt.Printf("  %-9s %-36s %d attempt(s), last status %d\n", b.name, b.url, got, res.StatusCode)
		if got != want[b.name] {
			fail(fmt.Sprintf("%s: %d attempts, want %d", b.name, got, want[b.name]))
		}
	}
}

// dialByName returns a base transport that dials the loopback address of
// each host name in addrs, whatever the port of the URL: a stand-in for DNS.
func dialByName(addrs map[string]string) *http.Transport {
	base := cleanhttp.DefaultPooledTransport()
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		to, ok := addrs[host]
		if !ok {
			return nil, fmt.Errorf("no backend named %s", host)
		}
		return d.DialContext(ctx, network, to)
	}
	return base
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "destinations:", msg)
	os.Exit(1)
}
