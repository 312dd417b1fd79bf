//go:build ignore

// modproxy writes a module proxy, in the file layout GOPROXY=file://DIR
// reads, holding the modules of this repository as they are in the working
// tree (the files git tracks), each at the version given. .ci/consumer uses
// it to build a module outside the repository that requires them, as a
// user would once they are tagged.
//
//	go run .ci/modproxy.go -out DIR -version v0.1.0 . otelretryhttp
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "", "directory of the proxy to write")
	version := flag.String("version", "", "version of every module, e.g. v0.1.0")
	flag.Parse()
	if *out == "" || *version == "" || flag.NArg() == 0 {
		log.Fatal("usage: go run .ci/modproxy.go -out DIR -version vX.Y.Z MODULE_DIR...")
	}
	for _, dir := range flag.Args() {
		if err := write(*out, *version, dir); err != nil {
			log.Fatalf("%s: %v", dir, err)
		}
	}
}

// write adds the module in dir to the proxy in out, at version.
func write(out, version, dir string) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	modPath := modulePath(gomod)
	if modPath == "" {
		return fmt.Errorf("no module line in go.mod")
	}
	files, err := moduleFiles(dir)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(modPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		w, err := zw.Create(modPath + "@" + version + "/" + f)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, b := range map[string][]byte{
		version + ".zip":  buf.Bytes(),
		version + ".mod":  gomod,
		version + ".info": []byte(info),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d files\n", modPath, version, len(files))
	return nil
}

// modulePath returns the path on the module line of a go.mod file.
func modulePath(gomod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(gomod))
	for s.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	return ""
}

// moduleFiles returns the files git tracks under dir, relative to it and
// slash-separated, without those of nested modules: what a module zip made
// from the repository holds.
func moduleFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", ".")
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	var nested []string // directories of nested modules
	for _, f := range all {
		if path.Base(f) == "go.mod" && path.Dir(f) != "." {
			nested = append(nested, path.Dir(f)+"/")
		}
	}
	var files []string
	for _, f := range all {
		if f == "" || f == "go.work" || f == "go.work.sum" {
			continue
		}
		inNested := false
		for _, n := range nested {
			inNested = inNested || strings.HasPrefix(f, n)
		}
		if !inNested {
			files = append(files, f)
		}
	}
	return files, nil
}
