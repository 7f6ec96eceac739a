// Command gomodzip writes one version of a Go module into a directory laid
// out as a module proxy (GOPROXY=file://DIR), the files the Go module proxy
// would serve for a tag: @v/list, @v/VERSION.info, .mod and .zip. The zip is
// made by golang.org/x/mod/zip, the code the go command checks module zips
// with, so its rules hold: no nested modules (examples/etcdlock is one), no
// vendor folders or symlinks, size limits.
//
//	go run . -module github.com/fencing/fencing/host/packages/go -version v0.4.0 \
//	    -dir host/packages/go -out dist/goproxy
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	path := flag.String("module", "", "the module path (as its go.mod says)")
	version := flag.String("version", "", "the version, v0.4.0")
	dir := flag.String("dir", "", "the module's folder (holding go.mod)")
	out := flag.String("out", "", "the proxy folder to write into")
	flag.Parse()
	if *path == "" || *version == "" || *dir == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: gomodzip -module PATH -version vX.Y.Z -dir DIR -out PROXYDIR")
		os.Exit(2)
	}
	if err := write(module.Version{Path: *path, Version: *version}, *dir, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gomodzip: %v\n", err)
		os.Exit(1)
	}
}

func write(m module.Version, dir, out string) error {
	if err := module.Check(m.Path, m.Version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	zipFile, err := os.Create(filepath.Join(at, m.Version+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(zipFile, m, dir); err != nil {
		zipFile.Close()
		return fmt.Errorf("module zip of %s: %w", dir, err)
	}
	if err := zipFile.Close(); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{m.Version, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		m.Version + ".mod":  mod,
		m.Version + ".info": info,
		"list":              []byte(m.Version + "\n"),
	}
	for name, bytes := range files {
		if err := os.WriteFile(filepath.Join(at, name), bytes, 0o644); err != nil {
			return err
		}
	}
	fmt.Println(filepath.Join(at, m.Version+".zip"))
	return nil
}
