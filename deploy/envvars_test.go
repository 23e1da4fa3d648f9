package deploy

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// module is the import path of the repository's module.
const module = "github.com/agentmesh/agentmesh"

// repoRoot is the repository's root, from this package's directory.
const repoRoot = ".."

// meshServices are the service binaries (cmd/<name>), each deployed under its own name.
var meshServices = []string{"orchestrator", "intent", "planning", "context", "generation", "action", "observation", "memory", "recovery"}

// envCallees are the names of the functions whose first argument, a string constant, is the name
// of an environment variable read: os.Getenv, os.LookupEnv, server.Env, and the env getter the
// orchestrator's options take (server.Env).
var envCallees = map[string]bool{"Getenv": true, "LookupEnv": true, "Env": true, "env": true}

// A goPackage is a package of the module linked into a binary, parsed.
type goPackage struct {
	path    string
	files   []*ast.File
	funcs   map[string][]*ast.FuncDecl // functions and methods by name
	consts  map[string]string          // string constants by name
	imports []map[string]string        // per file: the name a file uses for an import → its path
}

var (
	parsedMu sync.Mutex
	parsed   = map[string]*goPackage{}
	envMu    sync.Mutex
	envCache = map[string]map[string]bool{}
)

// binaryEnv returns the environment variables that the binary cmd/name reads, derived from the
// code: the module's packages it links (go list -deps), parsed, and the functions reachable from
// its main package (by name: a method call reaches every method of that name), whose calls of
// envCallees name a variable. It over-approximates what one run reads and never misses a read
// written as one of those calls.
func binaryEnv(t *testing.T, name string) map[string]bool {
	t.Helper()
	envMu.Lock()
	defer envMu.Unlock()
	if env, ok := envCache[name]; ok {
		return env
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", "./cmd/"+name)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/%s: %v", name, err)
	}
	pkgs := map[string]*goPackage{}
	var main *goPackage
	env := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) == 3 && strings.HasPrefix(fields[0], otelModules) {
			otelEnv(t, fields[1], strings.Split(fields[2], ","), env)
			continue
		}
		if len(fields) != 3 || !strings.HasPrefix(fields[0], module+"/") || strings.HasPrefix(fields[0], module+"/gen/") {
			continue
		}
		p := parsePackage(t, fields[0], fields[1], strings.Split(fields[2], ","))
		pkgs[p.path] = p
		if p.path == module+"/cmd/"+name {
			main = p
		}
	}
	if main == nil {
		t.Fatalf("go list -deps ./cmd/%s listed no main package", name)
	}
	methods := map[string][]*ast.FuncDecl{}
	declPkg := map[*ast.FuncDecl]*goPackage{}
	declFile := map[*ast.FuncDecl]int{}
	for _, p := range pkgs {
		for i, f := range p.files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					declPkg[fd], declFile[fd] = p, i
					if fd.Recv != nil {
						methods[fd.Name.Name] = append(methods[fd.Name.Name], fd)
					}
				}
			}
		}
	}

	seen := map[*ast.FuncDecl]bool{}
	var queue []*ast.FuncDecl
	reach := func(fds ...*ast.FuncDecl) {
		for _, fd := range fds {
			if !seen[fd] {
				seen[fd] = true
				queue = append(queue, fd)
			}
		}
	}
	// visit records the reads in n and reaches the functions it names.
	visit := func(p *goPackage, file int, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if len(n.Args) > 0 && envCallees[calleeName(n.Fun)] {
					if v, ok := stringValue(p, file, pkgs, n.Args[0]); ok {
						env[v] = true
					}
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					if path, ok := p.imports[file][x.Name]; ok {
						if q := pkgs[path]; q != nil {
							reach(q.funcs[n.Sel.Name]...)
						}
						return false
					}
				}
				reach(methods[n.Sel.Name]...)
			case *ast.Ident:
				for _, fd := range p.funcs[n.Name] {
					if fd.Recv == nil {
						reach(fd)
					}
				}
			}
			return true
		})
	}
	for _, p := range pkgs {
		for i, f := range p.files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if p == main || d.Name.Name == "init" && d.Recv == nil {
						reach(d)
					}
				case *ast.GenDecl:
					if d.Tok == token.VAR {
						visit(p, i, d)
					}
				}
			}
		}
	}
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		visit(declPkg[fd], declFile[fd], fd)
	}
	envCache[name] = env
	return env
}

// otelModules is the import path prefix of the OpenTelemetry SDK and its exporters, which read
// the standard OTEL_* variables themselves.
const otelModules = "go.opentelemetry.io/otel"

// otelName matches the name of a standard OpenTelemetry variable, or of a namespace of them.
var otelName = regexp.MustCompile(`^OTEL_[A-Z0-9_]+$`)

// otelEnv adds to env the variables an OpenTelemetry package (the files of dir) reads: every
// string literal that is an OTEL_* name (the SDK's keys: OTEL_SERVICE_NAME, OTEL_BSP_...), and
// for a file that reads a namespace of them (the exporters' `Namespace: "OTEL_EXPORTER_OTLP"`),
// the namespace joined with each name its With* options read ("HEADERS" →
// OTEL_EXPORTER_OTLP_HEADERS). The module's reads are found through the calls that reach them;
// the SDK's cannot be (it passes its keys through variables and builds the exporters' names),
// so every linked package's names count, an over-approximation like the module's scan.
func otelEnv(t *testing.T, dir string, files []string, env map[string]bool) {
	t.Helper()
	for _, f := range parseFiles(t, dir, files) {
		var namespaces, options []string
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if v, ok := literal(n); ok && otelName.MatchString(v) {
					env[v] = true
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Namespace" {
					if lit, ok := n.Value.(*ast.BasicLit); ok {
						if v, ok := literal(lit); ok && otelName.MatchString(v) {
							namespaces = append(namespaces, v)
						}
					}
				}
			case *ast.CallExpr:
				if strings.HasPrefix(calleeName(n.Fun), "With") && len(n.Args) > 0 {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok {
						if v, ok := literal(lit); ok && envName.MatchString(v) {
							options = append(options, v)
						}
					}
				}
			}
			return true
		})
		for _, ns := range namespaces {
			for _, o := range options {
				env[ns+"_"+o] = true
			}
		}
	}
}

// literal is the value of a string literal.
func literal(lit *ast.BasicLit) (string, bool) {
	if lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

// parsePackage parses the files of the package path in dir, once per test binary.
func parsePackage(t *testing.T, path, dir string, files []string) *goPackage {
	t.Helper()
	parsedMu.Lock()
	defer parsedMu.Unlock()
	if p, ok := parsed[path]; ok {
		return p
	}
	p := &goPackage{path: path, funcs: map[string][]*ast.FuncDecl{}, consts: map[string]string{}}
	for _, f := range parseFiles(t, dir, files) {
		imports := map[string]string{}
		for _, s := range f.Imports {
			ip, _ := strconv.Unquote(s.Path.Value)
			local := ip[strings.LastIndex(ip, "/")+1:]
			if s.Name != nil {
				local = s.Name.Name
			}
			imports[local] = ip
		}
		p.files, p.imports = append(p.files, f), append(p.imports, imports)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				p.funcs[d.Name.Name] = append(p.funcs[d.Name.Name], d)
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
								if v, ok := literal(lit); ok {
									p.consts[n.Name] = v
								}
							}
						}
					}
				}
			}
		}
	}
	parsed[path] = p
	return p
}

// parseFiles parses the Go files of dir that files names ("" entries skipped).
func parseFiles(t *testing.T, dir string, files []string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		if name == "" {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	return parsed
}

// calleeName is the name of the function a call calls: F of F(), pkg.F() or x.F().
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// envName matches the names of environment variables.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// stringValue is the value of a string literal or of a string constant of the module.
func stringValue(p *goPackage, file int, pkgs map[string]*goPackage, e ast.Expr) (string, bool) {
	var v string
	switch e := e.(type) {
	case *ast.BasicLit:
		v, _ = literal(e)
	case *ast.Ident:
		v = p.consts[e.Name]
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			if q := pkgs[p.imports[file][x.Name]]; q != nil {
				v = q.consts[e.Sel.Name]
			}
		}
	}
	return v, envName.MatchString(v)
}

// configRef matches a ${VAR} reference of a configuration file (pkg/config expands them from the
// environment and the .env file beside the file).
var configRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// configRefs returns the variables the configuration text refers to.
func configRefs(text string) map[string]bool {
	refs := map[string]bool{}
	for _, m := range configRef.FindAllStringSubmatch(text, -1) {
		refs[m[1]] = true
	}
	return refs
}

// checkEnvRead reports each variable of env that the binary of service does not read, nor a
// configuration layer it loads refers to (refs).
func checkEnvRead(t *testing.T, where, service string, env []string, refs map[string]bool) {
	t.Helper()
	reads := binaryEnv(t, service)
	for _, name := range env {
		if !reads[name] && !refs[name] {
			t.Errorf("%s sets %s, which the %s binary does not read", where, name, service)
		}
	}
}

// TestBinaryEnvFindsTheReads checks the scan itself on reads it must find and reads it must
// not: the orchestrator reads every stage's address through the getter it is given, a stage
// reads what it dials, and no stage reads the orchestrator's NATS_URL.
func TestBinaryEnvFindsTheReads(t *testing.T) {
	for _, c := range []struct {
		service string
		reads   []string
		not     []string
	}{
		{"orchestrator", []string{"LISTEN_ADDR", "METRICS_ADDR", "INTENT_ADDR", "RECOVERY_ADDR", "NATS_URL", "AGENTMESH_REPLICA", "AGENTMESH_CONFIG", "AGENTMESH_INSECURE", "TLS_CA", "OTEL_EXPORTER_OTLP_ENDPOINT",
			// read by the OpenTelemetry SDK and exporters alone (otelEnv)
			"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}, nil},
		{"planning", []string{"LISTEN_ADDR", "METRICS_ADDR", "GENERATION_ADDR", "GRPC_MAX_MESSAGE_BYTES"}, []string{"NATS_URL", "MEMORY_ADDR", "PLANNING_ADDR", "INTENT_ADDR"}},
		{"action", []string{"MEMORY_ADDR", "NATS_URL"}, []string{"GENERATION_ADDR", "INTENT_ADDR"}},
		{"recovery", []string{"LISTEN_ADDR", "AGENTMESH_MEMORY_RATIO", "GOMEMLIMIT"}, []string{"GENERATION_ADDR", "MEMORY_ADDR", "NATS_URL"}},
	} {
		env := binaryEnv(t, c.service)
		for _, v := range c.reads {
			if !env[v] {
				t.Errorf("the scan misses %s of %s", v, c.service)
			}
		}
		for _, v := range c.not {
			if env[v] {
				t.Errorf("the scan says %s reads %s", c.service, v)
			}
		}
	}
}
