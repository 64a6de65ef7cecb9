package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestNetworkKeyIsCreatedOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", networkKeyFile)
	first, created, err := loadNetworkKey(path)
	if err != nil || !created {
		t.Fatalf("first load: created %v, %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	again, created, err := loadNetworkKey(path)
	if err != nil || created {
		t.Fatalf("second load: created %v, %v", created, err)
	}
	if !bytes.Equal(first, again) {
		t.Error("the key changed across loads")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d files, want the key alone (no temporary left)", len(entries))
	}
}

func TestNetworkKeyConcurrentStartsAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), networkKeyFile)
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	for i := range keys {
		wg.Go(func() {
			k, _, err := loadNetworkKey(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) {
			t.Fatal("concurrent starts ended with different keys")
		}
	}
}

func TestNetworkKeyRefusesAForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), networkKeyFile)
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadNetworkKey(path); err == nil || !strings.Contains(err.Error(), "is not a PEM") {
		t.Errorf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not a key" {
		t.Error("a foreign file was overwritten")
	}
}

func TestNetworkKeyWithoutPathIsPerRun(t *testing.T) {
	a, _, err := loadNetworkKey("")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := loadNetworkKey("")
	if bytes.Equal(a, b) || len(a) != 64 {
		t.Error("per-run keys must be fresh Ed25519 keys")
	}
}
