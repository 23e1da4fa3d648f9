package mcp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// childExists reports whether a process whose environment holds name=value still exists
// (reaped processes vanish from /proc).
func childExists(name, value string) bool {
	want := []byte(name + "=" + value)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				return true
			}
		}
	}
	return false
}

// killMarked kills every process whose environment holds name=value.
func killMarked(name, value string) {
	want := []byte(name + "=" + value)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	}
}
