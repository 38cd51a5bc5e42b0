package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix starts the environment variable of every flag.
const EnvPrefix = "COUNTERSIGN_"

// EnvName is the environment variable that sets the flag --name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Source is where a flag's value came from.
type Source int

const (
	FromFlag Source = iota + 1 // the command line
	FromEnv                    // its COUNTERSIGN_* variable
	FromFile                   // the config file
)

// Origin is where one flag's value came from: Where is the flag
// (--listen), the variable (COUNTERSIGN_LISTEN) or the file and line.
type Origin struct {
	Source Source
	Where  string
}

// Settings says what Load read.
type Settings struct {
	// File is the config file read, "" when none was named.
	File string
	// Origins holds, for each flag not left at its default, where its
	// value came from.
	Origins map[string]Origin
}

// Keys lists, in name order, the flags whose value came from source.
func (s *Settings) Keys(source Source) []string {
	var keys []string
	for name, o := range s.Origins {
		if o.Source == source {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

// notSettings are the flags neither the environment nor a file sets:
// cobra's own --help.
var notSettings = map[string]bool{"help": true}

// Load fills every flag of fs that the command line left unset, from its
// environment variable (lookupEnv, normally os.LookupEnv) and then from the
// YAML file that the flag fileFlag names (by flag or variable; no file
// when it is empty). It returns every problem at once, each a *Problem,
// joined; the flags it could set are set even then.
func Load(fs *pflag.FlagSet, fileFlag string, lookupEnv func(string) (string, bool)) (*Settings, error) {
	s := &Settings{Origins: map[string]Origin{}}
	var problems []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			s.Origins[f.Name] = Origin{FromFlag, "--" + f.Name}
			return
		}
		name := EnvName(f.Name)
		v, ok := lookupEnv(name)
		if !ok || v == "" || notSettings[f.Name] {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			problems = append(problems, &Problem{Where: name, Key: f.Name, Err: invalid(f)})
			return
		}
		s.Origins[f.Name] = Origin{FromEnv, name}
	})
	if fileFlag != "" {
		ff := fs.Lookup(fileFlag)
		if ff == nil {
			return s, fmt.Errorf("config: the FlagSet has no --%s", fileFlag)
		}
		s.File = ff.Value.String()
	}
	if s.File != "" {
		problems = append(problems, s.loadFile(fs, fileFlag)...)
	}
	return s, errors.Join(problems...)
}

// loadFile sets from the file every flag still unset.
func (s *Settings) loadFile(fs *pflag.FlagSet, fileFlag string) []error {
	entries, problems := readFile(s.File)
	for _, e := range entries {
		where := s.File + ":" + strconv.Itoa(e.line)
		f := fs.Lookup(e.key)
		switch {
		case e.problem != nil:
			problems = append(problems, &Problem{Where: where, Key: e.key, Err: e.problem})
			continue
		case f == nil || notSettings[e.key]:
			problems = append(problems, &Problem{Where: where, Err: fmt.Errorf("%w %q: there is no flag --%s (the keys are the flag names, without --)", ErrUnknownKey, e.key, e.key)})
			continue
		case e.key == fileFlag:
			problems = append(problems, &Problem{Where: where, Key: e.key, Err: fmt.Errorf("%w: a config file cannot name another; set --%s or %s", ErrInvalidValue, fileFlag, EnvName(fileFlag))})
			continue
		case f.Changed: // the command line or the environment said otherwise
			continue
		}
		if err := set(fs, f, e.values, e.list); err != nil {
			problems = append(problems, &Problem{Where: where, Key: e.key, Err: err})
			continue
		}
		s.Origins[f.Name] = Origin{FromFile, where}
	}
	return problems
}

// set gives f the file's values: a list replaces a list flag's default,
// item by item; a flag of one value takes one.
func set(fs *pflag.FlagSet, f *pflag.Flag, values []string, list bool) error {
	sv, isList := f.Value.(pflag.SliceValue)
	switch {
	case list && !isList:
		return fmt.Errorf("%w: want %s, not a list", ErrInvalidValue, want(f))
	case list:
		if err := sv.Replace(values); err != nil {
			return invalid(f)
		}
		f.Changed = true
		return nil
	}
	if err := fs.Set(f.Name, values[0]); err != nil {
		return invalid(f)
	}
	return nil
}

// invalid says what f takes, without the value it was given.
func invalid(f *pflag.Flag) error {
	return fmt.Errorf("%w: want %s", ErrInvalidValue, want(f))
}

func want(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "bool":
		return "true or false"
	case "duration":
		return "a duration such as 500ms, 2s or 1m"
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "stringSlice", "stringArray":
		return "a list of strings"
	default:
		return "a " + t
	}
}
