package docs

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flagDefault is one fs.XxxVar call of a flags.go: the kind of flag (the
// method's name) and its default, when the source says what it is.
type flagDefault struct {
	method string
	value  constant.Value
	known  bool
}

// String is the default as the flag package prints it.
func (f flagDefault) String() string {
	if f.method == "DurationVar" {
		if v, ok := constant.Int64Val(constant.ToInt(f.value)); ok {
			return time.Duration(v).String()
		}
	}
	return f.value.String()
}

// matches says whether doc, a default as a page writes it, is f's value.
func (f flagDefault) matches(doc string) bool {
	switch f.method {
	case "DurationVar":
		d, err := time.ParseDuration(doc)
		v, ok := constant.Int64Val(constant.ToInt(f.value))
		return err == nil && ok && time.Duration(v) == d
	case "IntVar", "Int64Var", "UintVar", "Uint64Var":
		n, err := strconv.ParseInt(doc, 10, 64)
		v, ok := constant.Int64Val(constant.ToInt(f.value))
		return err == nil && ok && v == n
	case "Float64Var":
		x, err := strconv.ParseFloat(doc, 64)
		v, _ := constant.Float64Val(constant.ToFloat(f.value))
		return err == nil && v == x
	case "BoolVar":
		return f.value.Kind() == constant.Bool && strconv.FormatBool(constant.BoolVal(f.value)) == doc
	case "StringVar":
		return f.value.Kind() == constant.String && constant.StringVal(f.value) == doc
	}
	return false
}

// comparableKinds are the flag kinds matches knows how to compare.
var comparableKinds = map[string]bool{
	"DurationVar": true, "IntVar": true, "Int64Var": true, "UintVar": true, "Uint64Var": true,
	"Float64Var": true, "BoolVar": true, "StringVar": true,
}

// constEval evaluates Go expressions from the source: literals, time units,
// net/http's DefaultMaxHeaderBytes, constants of the project's packages, and
// fields of the composite literals their Default* functions return (the
// operator's defaults are controller.DefaultConfig's fields). Anything else
// (a local variable, a call) is unknown.
type constEval struct {
	t    *testing.T
	fset *token.FileSet
	pkgs map[string]*srcPackage // by directory, relative to the root
}

type srcPackage struct {
	consts map[string]srcExpr
	fields map[string]srcExpr
}

// srcExpr is an expression with what resolves its names: its file's
// imports (local name to path) and its package's directory.
type srcExpr struct {
	expr    ast.Expr
	imports map[string]string
	dir     string
}

const modulePath = "elasti.dev/elasti/"

func newConstEval(t *testing.T) *constEval {
	return &constEval{t: t, fset: token.NewFileSet(), pkgs: map[string]*srcPackage{}}
}

func (e *constEval) parse(rel string) (*ast.File, map[string]string) {
	e.t.Helper()
	f, err := parser.ParseFile(e.fset, filepath.Join(repoRoot, rel), nil, parser.SkipObjectResolution)
	if err != nil {
		e.t.Fatal(err)
	}
	imports := map[string]string{}
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	return f, imports
}

// flags returns the flags a flags.go defines, by name.
func (e *constEval) flags(rel string) map[string]flagDefault {
	e.t.Helper()
	f, imports := e.parse(rel)
	out := map[string]flagDefault{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 3 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Var") {
			return true
		}
		if recv, ok := sel.X.(*ast.Ident); !ok || recv.Name != "fs" {
			return true
		}
		lit, ok := call.Args[1].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		v, known := e.eval(srcExpr{call.Args[2], imports, filepath.Dir(rel)})
		out[name] = flagDefault{method: sel.Sel.Name, value: v, known: known && comparableKinds[sel.Sel.Name]}
		return true
	})
	if len(out) < 10 {
		e.t.Fatalf("%s: found only %d flags", rel, len(out))
	}
	return out
}

func (e *constEval) pkg(dir string) *srcPackage {
	if p, ok := e.pkgs[dir]; ok {
		return p
	}
	p := &srcPackage{consts: map[string]srcExpr{}, fields: map[string]srcExpr{}}
	e.pkgs[dir] = p
	entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		f, imports := e.parse(filepath.Join(dir, ent.Name()))
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							p.consts[n.Name] = srcExpr{vs.Values[i], imports, dir}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Body == nil || !strings.HasPrefix(d.Name.Name, "Default") {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if kv, ok := n.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok {
							p.fields[k.Name] = srcExpr{kv.Value, imports, dir}
						}
					}
					return true
				})
			}
		}
	}
	return p
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

func (e *constEval) eval(x srcExpr) (constant.Value, bool) {
	switch n := x.expr.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(n.Value, n.Kind, 0)
		return v, v.Kind() != constant.Unknown
	case *ast.ParenExpr:
		return e.eval(srcExpr{n.X, x.imports, x.dir})
	case *ast.Ident:
		switch n.Name {
		case "true", "false":
			return constant.MakeBool(n.Name == "true"), true
		}
		if c, ok := e.pkg(x.dir).consts[n.Name]; ok {
			return e.eval(c)
		}
	case *ast.UnaryExpr:
		if v, ok := e.eval(srcExpr{n.X, x.imports, x.dir}); ok {
			return constant.UnaryOp(n.Op, v, 0), true
		}
	case *ast.BinaryExpr:
		l, lok := e.eval(srcExpr{n.X, x.imports, x.dir})
		r, rok := e.eval(srcExpr{n.Y, x.imports, x.dir})
		if !lok || !rok {
			return nil, false
		}
		if n.Op == token.SHL || n.Op == token.SHR {
			s, ok := constant.Uint64Val(r)
			return constant.Shift(l, n.Op, uint(s)), ok
		}
		return constant.BinaryOp(l, n.Op, r), true
	case *ast.SelectorExpr:
		if id, ok := n.X.(*ast.Ident); ok {
			switch path := x.imports[id.Name]; {
			case path == "time":
				d, ok := timeUnits[n.Sel.Name]
				return constant.MakeInt64(int64(d)), ok
			case path == "net/http" && n.Sel.Name == "DefaultMaxHeaderBytes":
				return constant.MakeInt64(http.DefaultMaxHeaderBytes), true
			case strings.HasPrefix(path, modulePath):
				if c, ok := e.pkg(strings.TrimPrefix(path, modulePath)).consts[n.Sel.Name]; ok {
					return e.eval(c)
				}
				return nil, false
			}
		}
		// A field of a value the file built from a Default* function of
		// one of the project's packages (o.controller.PortQuarantine).
		paths := make([]string, 0, len(x.imports))
		for _, path := range x.imports {
			if strings.HasPrefix(path, modulePath) {
				paths = append(paths, path)
			}
		}
		sort.Strings(paths)
		for _, path := range paths {
			if f, ok := e.pkg(strings.TrimPrefix(path, modulePath)).fields[n.Sel.Name]; ok {
				return e.eval(f)
			}
		}
	}
	return nil, false
}
