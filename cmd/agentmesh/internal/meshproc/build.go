package meshproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Stage is one of the eight stage services of the mesh.
type Stage struct {
	// Name is the binary's name: the service is built from ./cmd/<Name>.
	Name string
	// AddrEnv is the variable that gives the service's address to the other processes.
	AddrEnv string
}

// Stages are the stage services a Mesh starts once, beside its orchestrator replicas.
var Stages = []Stage{
	{"intent", "INTENT_ADDR"}, {"planning", "PLANNING_ADDR"}, {"context", "CONTEXT_ADDR"},
	{"generation", "GENERATION_ADDR"}, {"action", "ACTION_ADDR"}, {"observation", "OBSERVATION_ADDR"},
	{"memory", "MEMORY_ADDR"}, {"recovery", "RECOVERY_ADDR"},
}

// Orchestrator is the binary of the orchestrator replicas, built from ./cmd/orchestrator.
const Orchestrator = "orchestrator"

// natsServer is the binary of the NATS server, built from the module
// github.com/nats-io/nats-server/v2 that go.mod requires.
const natsServer = "nats-server"

// natsServerPackage is the main package of the NATS server.
const natsServerPackage = "github.com/nats-io/nats-server/v2"

// goEnv and goDir are the environment and the working directory the test binary started with:
// its package's directory, inside the module. Tests change both (HOME, where the go command
// keeps its caches, and the working directory, to keep the developer's configuration out)
// before Build runs the go command.
var (
	goEnv    = os.Environ()
	goDir, _ = os.Getwd()
)

// built is the outcome of the one build of a test binary.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// Build compiles the nine agentmesh binaries and nats-server into a temporary directory the
// first time a test of this test binary calls it, and returns the directory; later calls
// return the same one. A failed build fails t, and every later caller. RemoveBuild deletes the
// directory once the tests are done.
func Build(t testing.TB) string {
	t.Helper()
	built.once.Do(func() { built.dir, built.err = build() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// CLI is the agentmesh command, built from ./cmd/agentmesh by BuildCLI.
const CLI = "agentmesh"

// cli is the outcome of the one build of the agentmesh command.
var cli struct {
	once sync.Once
	err  error
}

// BuildCLI compiles the agentmesh command (CLI) into Build's directory the first time a test
// of this test binary calls it, and returns its path; tests that run `agentmesh dev` as a
// process of its own use it. A failed build fails t, and every later caller.
func BuildCLI(t testing.TB) string {
	t.Helper()
	dir := Build(t)
	cli.once.Do(func() {
		root, err := moduleRoot()
		if err == nil {
			_, err = goCommand(root, "build", "-o", filepath.Join(dir, CLI), "./cmd/"+CLI)
		}
		cli.err = err
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return filepath.Join(dir, CLI)
}

// RemoveBuild deletes the directory Build compiled into, if it ran; Main calls it once the
// tests are done.
func RemoveBuild() error {
	if built.dir == "" {
		return nil
	}
	return os.RemoveAll(built.dir)
}

// build compiles the binaries from the root of the module holding the working directory.
func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "agentmesh-meshproc-")
	if err != nil {
		return "", fmt.Errorf("meshproc: %w", err)
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator), "./cmd/" + Orchestrator}
	for _, s := range Stages {
		args = append(args, "./cmd/"+s.Name)
	}
	if _, err := goCommand(root, args...); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	if _, err := goCommand(root, "build", "-o", filepath.Join(dir, natsServer), natsServerPackage); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// moduleRoot returns the root directory of the module holding the test binary's package.
func moduleRoot() (string, error) {
	gomod, err := goCommand(goDir, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	gomod = strings.TrimSpace(gomod)
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("meshproc: %s is not inside a Go module", goDir)
	}
	return filepath.Dir(gomod), nil
}

// goCommand runs the go command in dir and returns its output.
func goCommand(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("meshproc: go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// Main runs the tests of a test binary that uses Build, as its TestMain: it runs them, checks
// that they leaked no goroutine (go.uber.org/goleak), removes what Build built, and exits.
func Main(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := RemoveBuild(); err != nil {
			fmt.Fprintln(os.Stderr, "meshproc: removing the built binaries:", err)
			code = max(code, 1)
		}
		os.Exit(code)
	}))
}
