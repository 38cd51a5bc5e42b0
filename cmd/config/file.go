package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// entry is one key of the file with its value, as strings.
type entry struct {
	key    string
	line   int
	values []string // one for a scalar
	list   bool
	// problem is what makes the key unusable, nil when it is not.
	problem error
}

// readFile reads path as one YAML mapping, returning its entries in the
// file's order, or the problem that makes the whole file unusable.
func readFile(path string) ([]entry, []error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{&Problem{Where: path, Err: fmt.Errorf("%w: %w", ErrFile, err)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil // an empty file sets nothing
	case err != nil:
		return nil, []error{&Problem{Where: path, Err: fmt.Errorf("%w: %w", ErrFile, err)}}
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, []error{&Problem{Where: path, Err: fmt.Errorf("%w: more than one YAML document; keep one mapping of settings", ErrFile)}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if (root.Kind == yaml.ScalarNode && root.Tag == "!!null") || (root.Kind == yaml.DocumentNode && len(root.Content) == 0) {
		return nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, []error{&Problem{Where: path + ":" + strconv.Itoa(root.Line),
			Err: fmt.Errorf("%w: want one mapping of settings to values, such as \"listen: 0.0.0.0:8080\"", ErrFile)}}
	}
	var (
		entries []entry
		seen    = map[string]int{}
	)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolve(root.Content[i+1])
		e := entry{key: k.Value, line: k.Line}
		if k.Kind != yaml.ScalarNode {
			e.key, e.problem = "", fmt.Errorf("%w: a key must be a flag name", ErrUnknownKey)
		} else if first, ok := seen[k.Value]; ok {
			e.problem = fmt.Errorf("%w: given twice (first on line %d)", ErrInvalidValue, first)
		} else {
			seen[k.Value] = k.Line
			e.values, e.list, e.problem = value(v)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// value reads a key's value: one scalar, or a list of them.
func value(v *yaml.Node) (values []string, list bool, problem error) {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil, false, fmt.Errorf("%w: no value; give one or remove the key", ErrInvalidValue)
	case v.Kind == yaml.ScalarNode:
		return []string{v.Value}, false, nil
	case v.Kind == yaml.SequenceNode:
		for _, item := range v.Content {
			if item = resolve(item); item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return nil, true, fmt.Errorf("%w: item on line %d: each item of the list must be one value", ErrInvalidValue, item.Line)
			}
			values = append(values, item.Value)
		}
		return values, true, nil
	}
	return nil, false, fmt.Errorf("%w: want a value or a list, not a mapping", ErrInvalidValue)
}

// resolve follows a YAML alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
