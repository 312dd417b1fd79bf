package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// runBackend is the backend mode: an HTTP server on addr that acts on every
// request (its side effect is one line, "METHOD ID", written to stdout with
// a single write before any work), works for a few milliseconds and answers
// 200. The harness reads stdout through a pipe, so a record written before a
// SIGKILL is not lost. /health answers 200 and records nothing.
func runBackend(addr string, work time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			// The request did not arrive whole: nothing is done.
			return
		}
		id := r.Header.Get("X-Request-Id")
		if id == "" {
			http.Error(w, "no X-Request-Id", http.StatusBadRequest)
			return
		}
		// The side effect. One line is one write(2) to a pipe, shorter than
		// PIPE_BUF, so lines from concurrent handlers never interleave.
		if _, err := fmt.Fprintf(os.Stdout, "%s %s\n", r.Method, id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		time.Sleep(work)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "done\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(ln)
}
