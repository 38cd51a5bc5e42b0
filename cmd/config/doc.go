// Package config fills a command's flags from COUNTERSIGN_* environment
// variables and a YAML file, the way OPA's --config-file and Cerbos's
// .cerbos.yaml with environment overrides do, so that a container or a
// Kubernetes manifest configures `countersign serve` without putting a
// database password in the process list.
//
// # Names
//
// Every flag --NAME has the environment variable COUNTERSIGN_NAME, NAME
// upper-cased with '-' turned into '_' (--issuer-jwks is
// COUNTERSIGN_ISSUER_JWKS), and the file key NAME:
//
//	listen: 0.0.0.0:8080
//	issuer-jwks: /etc/countersign/jwks.json
//	mcp-allowed-origins: [https://a.example, https://b.example]
//
// The names come from the FlagSet itself, so a flag added to the command is
// covered without a line here.
//
// # Precedence
//
// A flag on the command line wins over its environment variable, which
// wins over the file, which wins over the flag's default. Load visits only
// the flags the command line left unset: first the environment (the flag
// naming the file included, so COUNTERSIGN_CONFIG works), then the file. An
// empty environment variable counts as unset, as `docker run -e NAME=`
// leaves one.
//
// # Strictness
//
// The file is one YAML mapping of flag names to values. A key that is no
// flag, a key given twice, a list for a flag of one value, a mapping, an
// empty value, and a value the flag does not parse are problems, each
// naming the key and its line. Load reports every problem at once (each a
// *Problem, joined), so that `countersign config check` can list them all.
//
// # Secrets
//
// A Problem never repeats a value: a string flag takes any value, so only
// typed flags (booleans, durations, lists) can be refused, and their
// problem says what the flag wants instead of what it got. Settings
// records where each value came from, never the value.
package config
