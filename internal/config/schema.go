package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A configuration error names where the problem is the way the file is
// written — its YAML path and line (`agents[1].brain_dir (line 9)`) — and
// what is wrong in words, not in Go's types: an unknown key with the
// nearest known one ("did you mean shutdown_timeout?"), a value of the
// wrong kind ("want an integer, not a string"), a value its type refuses.
// The schema is the Config type itself: checkSchema walks the parsed tree
// against it before anything is decoded, so each error is where the user
// wrote it (decoding re-marshalled YAML would move the lines). Values are
// quoted only through shown, keys only when short or near a known key
// (see scrub.go): no error quotes a secret.

// maxSchemaErrors bounds how many problems one error lists.
const maxSchemaErrors = 3

// schemaError is one problem at a place in the file.
type schemaError struct {
	path string
	line int
	msg  string
}

func (e schemaError) String() string { return where(e.path, e.line) + ": " + e.msg }

// where names a place in the file: "agents[1].brain_dir (line 9)".
func where(path string, line int) string {
	if path == "" {
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("%s (line %d)", path, line)
}

// schemaErr is err at a place in the file; it matches ErrInvalid.
func schemaErr(path string, line int, err error) error {
	return placedError{where(path, line), err}
}

type placedError struct {
	where string
	err   error
}

func (e placedError) Error() string        { return e.where + ": " + e.err.Error() }
func (e placedError) Unwrap() error        { return e.err }
func (e placedError) Is(target error) bool { return target == ErrInvalid }

// oneLine joins the lines of a yaml.v3 error ("yaml: unmarshal
// errors:\n  line 3: ...") into one, for a one-line message.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	lines := strings.Split(msg, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" && l != "yaml: unmarshal errors:" {
			out = append(out, l)
		}
	}
	return invalidError(strings.Join(out, "; "))
}

// checkSchema reports the keys Config does not have and the values that
// cannot be of their key's kind, as one line.
func checkSchema(doc *yaml.Node) error {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		doc = doc.Content[0]
	}
	var errs []schemaError
	walkSchema(doc, typeOfConfig, "", &errs, 0)
	if len(errs) == 0 {
		return nil
	}
	parts := make([]string, 0, maxSchemaErrors+1)
	for i, e := range errs {
		if i == maxSchemaErrors {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		parts = append(parts, e.String())
	}
	return invalidError(strings.Join(parts, "; "))
}

// invalidError is a configuration error that matches ErrInvalid without
// saying so in its text.
type invalidError string

func (e invalidError) Error() string        { return string(e) }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// maxSchemaDepth bounds the walk (the schema is a few levels deep; an
// alias cycle is not).
const maxSchemaDepth = 16

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	typeOfConfig    = reflect.TypeFor[Config]()
)

// walkSchema checks n against type t at path.
func walkSchema(n *yaml.Node, t reflect.Type, path string, errs *[]schemaError, depth int) {
	add := func(line int, format string, args ...any) {
		*errs = append(*errs, schemaError{path: path, line: line, msg: fmt.Sprintf(format, args...)})
	}
	if depth > maxSchemaDepth {
		add(n.Line, "nested too deeply")
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // an empty value keeps the default
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// Duration, ByteSize, FileMode: their own rule, said in their
		// own words (without the line, which is said here).
		if err := reflect.New(t).Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			add(n.Line, "%s", dropLine(err.Error()))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		walkSchema(n, t.Elem(), path, errs, depth+1)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if secretTypes["config."+t.Name()] {
				add(n.Line, "a secret is never written in the configuration: give {file: PATH} or {env: NAME}")
				return
			}
			if keys := keysOf(t); len(keys) <= 8 {
				add(n.Line, "want a mapping (%s), not %s", strings.Join(keys, ", "), kindOf(n))
			} else {
				add(n.Line, "want a mapping, not %s", kindOf(n))
			}
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := join(path, k.Value)
			if first, ok := seen[k.Value]; ok {
				*errs = append(*errs, schemaError{path: shownKey(path, k.Value, t), line: k.Line,
					msg: fmt.Sprintf("repeated key (first at line %d)", first)})
				continue
			}
			seen[k.Value] = k.Line
			f, ok := fieldOf(t, k.Value)
			if !ok {
				*errs = append(*errs, schemaError{path: shownKey(path, k.Value, t), line: k.Line, msg: unknownKey(k.Value, t)})
				continue
			}
			walkSchema(v, f.Type, sub, errs, depth+1)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			add(n.Line, "want a list, not %s", kindOf(n))
			return
		}
		for i, e := range n.Content {
			walkSchema(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs, depth+1)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			add(n.Line, "want a string, not %s", kindOf(n))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			add(n.Line, "want true or false, not %s", kindOf(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			add(n.Line, "want an integer, not %s", kindOf(n))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch {
		case n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int":
			add(n.Line, "want an unsigned integer, not %s", kindOf(n))
		case strings.HasPrefix(n.Value, "-"):
			add(n.Line, "want an unsigned integer, not a negative one")
		}
	case reflect.Float32, reflect.Float64:
		if t := n.ShortTag(); n.Kind != yaml.ScalarNode || t != "!!int" && t != "!!float" {
			add(n.Line, "want a number, not %s", kindOf(n))
		}
	}
}

// kindOf names what a node is, never quoting its value.
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!str":
		return "a string"
	}
	return "a value of another kind"
}

// dropLine removes a "line N: " prefix (the caller says where).
func dropLine(msg string) string {
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if _, after, ok := strings.Cut(rest, ": "); ok {
			return after
		}
	}
	return msg
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlName is a struct field's key ("" for one that has none).
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name) // yaml.v3's default
	}
	return name
}

// fieldOf finds the field a key decodes into.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keysOf lists the keys of a struct type, in the type's order.
func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

// nearestKey is the key of t that key most likely meant: the same up to
// case, '-' for '_' and order of words, or at most a few edits away; ""
// when none is near.
func nearestKey(key string, t reflect.Type) string {
	norm := func(s string) string {
		s = strings.ToLower(strings.ReplaceAll(s, "-", "_"))
		w := strings.Split(s, "_")
		sort.Strings(w)
		return strings.Join(w, "_")
	}
	best, bestD := "", 0
	for _, k := range keysOf(t) {
		if norm(k) == norm(key) {
			return k
		}
		d := editDistance(strings.ToLower(key), k)
		if limit := max(1, min(3, len(k)/4)); d <= limit && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// unknownKey says that key is not one of t's and what was likely meant.
func unknownKey(key string, t reflect.Type) string {
	if k := nearestKey(key, t); k != "" {
		return fmt.Sprintf("unknown key; did you mean %s?", k)
	}
	keys := keysOf(t)
	if len(keys) <= 8 {
		return "unknown key; the keys here are " + strings.Join(keys, ", ")
	}
	return "unknown key (docs/configuration.md lists every key)"
}

// shownKey is the path of an unknown or repeated key below parent for a
// message: the key itself when it is short and plain or near a known key
// (a misspelt key is no secret), else only its length.
func shownKey(parent, key string, t reflect.Type) string {
	if shown(key) == fmt.Sprintf("%q", key) || nearestKey(key, t) != "" {
		return join(parent, key)
	}
	return join(parent, fmt.Sprintf("<a key of %d characters>", len(key)))
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
