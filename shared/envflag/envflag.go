// Package envflag gives every flag of a command an environment variable of the same name,
// so that Terraform, SAM, compose files and `loam dev` set any setting of any service the
// same way: flag --flush-interval is LOAM_FLUSH_INTERVAL, --tls-cert is LOAM_TLS_CERT.
//
// A flag given on the command line wins over its variable, which wins over the default.
// A command may name a flag's variable itself (lognode-svc's --id is LOAM_NODE_ID) and keep
// older names as aliases; the first variable set, canonical name first, is used.
//
// docs/configuration.md is the table of every service's flags and variables; a test renders
// it from the real flag sets (Table), so it cannot go stale.
package envflag

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Prefix starts every variable.
const Prefix = "LOAM_"

// Vars maps a flag name to its variables, canonical first; a flag not in it has the one
// variable Name(flag).
type Vars map[string][]string

// Name is the variable of flag name by the rule: LOAM_ and the name in upper case with '-'
// as '_' (flush-interval: LOAM_FLUSH_INTERVAL).
func Name(flag string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Of is flag name's variables, canonical first.
func (v Vars) Of(name string) []string {
	if names, ok := v[name]; ok {
		return names
	}
	return []string{Name(name)}
}

// Apply sets every flag of fs not given on its command line (call it after fs.Parse) from
// the first of its variables that is set and not empty. A value the flag refuses is an
// error naming the variable.
func Apply(fs *flag.FlagSet, vars Vars) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		for _, name := range vars.Of(f.Name) {
			v, ok := os.LookupEnv(name)
			if !ok || v == "" {
				continue
			}
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment variable %s=%q (flag --%s): %w", name, v, f.Name, serr)
			}
			return
		}
	})
	return err
}

// Parse is fs.Parse(args) and then Apply.
func Parse(fs *flag.FlagSet, args []string, vars Vars) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return Apply(fs, vars)
}

// Table renders fs's flags as the rows of a Markdown table, sorted by name:
// | `--flag` | `LOAM_FLAG` (aliases) | default | usage |. def, when set, replaces a
// default that depends on the machine (a host name, say) with a description.
func Table(fs *flag.FlagSet, vars Vars, def map[string]string) string {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, f := range flags {
		names := vars.Of(f.Name)
		env := make([]string, len(names))
		for i, n := range names {
			env[i] = "`" + n + "`"
		}
		d, ok := def[f.Name]
		switch {
		case ok:
		case f.DefValue == "":
			d = ""
		default:
			d = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, strings.Join(env, ", "), cell(d), cell(usage(f)))
	}
	return b.String()
}

// usage is f's usage line without the environment notes some flags carry in it, which the
// table has a column for.
func usage(f *flag.Flag) string {
	_, u := flag.UnquoteUsage(f)
	return strings.TrimSpace(u)
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
