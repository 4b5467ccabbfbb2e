package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/loamhq/loam/shared/streamapi"
	"github.com/loamhq/loam/shared/tlsconf"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command failed; the reason is on stderr
	exitUsage = 2 // the command line was wrong
)

const defaultServer = "http://127.0.0.1:8080"

const mainUsage = `loam runs Loam's embedded cluster and is a client of its native HTTP API.

Usage:
  loam [global flags] <command> [arguments] [flags]

Commands:
  dev                    run the embedded cluster (sequencer + log node) in this process
  lognode [flags]        run one log node: lognode-svc's flags (loam lognode -h)
  sequencer [flags]      run one sequencer voter, or members|remove|restore:
                         sequencer-svc's flags (loam sequencer -h)
  stream create NAME     create a stream
  stream list            list the namespace's streams
  stream describe NAME   show a stream's settings and each partition's offsets
  stream update NAME     grow partitions, change retention or cleanup policy
  stream delete NAME     delete a stream and its records
  produce STREAM         write records: one per line of stdin, or one with --value
  consume STREAM         print records of one or all partitions (--consumer NAME: as a
                         member of a named consumer, resuming at its committed offsets)
  consumer list          list the namespace's named consumers
  consumer describe NAME show a named consumer's offsets, lag, leases and members
  kafka-group list       list the namespace's Kafka consumer groups
  kafka-group describe GROUP
                         show a Kafka group's committed offsets and lag
  consumer delete NAME   delete a named consumer (--force: even with live members)
  consumer reset NAME    reset its offsets on a stream (--to-earliest, --to-latest,
                         --to-offset N, --to-timestamp T; --partition P; --force)
  quota get|set          show or set the namespace's ingest quota (bytes per second)
  namespace create|list|delete   manage namespaces (admin key)
  key create|list|revoke         manage API keys (admin key)
  version                print the version
  help [command]         show a command's flags

Global flags (accepted before or after the command):
  --server URL      the log node's HTTP address (env LOAM_SERVER; default ` + defaultServer + `)
  --namespace NS    the namespace (env LOAM_NAMESPACE; default "default")
  --api-key KEY     sent as "Authorization: Bearer KEY" (env LOAM_API_KEY)
  --ca-cert FILE    PEM CA the https:// server's certificate must chain to, instead of
                    the system's roots (env LOAM_CA_CERT; loam dev --tls prints it)
  --zone ZONE       talk to a log node of this availability zone, found through the
                    server's node registry (GET /v1/cluster/nodes); env LOAM_ZONE

Exit status: 0 success, 1 failure (the server's error on stderr), 2 usage error.
`

// usageError is a command-line mistake: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// globals are the flags every client command takes.
type globals struct {
	server, namespace, apiKey, zone, caCert string
}

// defaultGlobals reads the environment.
func defaultGlobals() globals {
	g := globals{server: defaultServer, namespace: "default"}
	if v := strings.TrimSpace(os.Getenv("LOAM_SERVER")); v != "" {
		g.server = v
	}
	if v := strings.TrimSpace(os.Getenv("LOAM_NAMESPACE")); v != "" {
		g.namespace = v
	}
	g.apiKey = strings.TrimSpace(os.Getenv("LOAM_API_KEY"))
	g.zone = strings.TrimSpace(os.Getenv("LOAM_ZONE"))
	g.caCert = strings.TrimSpace(os.Getenv("LOAM_CA_CERT"))
	return g
}

// register adds the global flags to fs, their defaults being g's current values.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", g.server, "the log node's HTTP address (env LOAM_SERVER)")
	fs.StringVar(&g.namespace, "namespace", g.namespace, "the namespace (env LOAM_NAMESPACE)")
	fs.StringVar(&g.apiKey, "api-key", g.apiKey, "API key, sent as Authorization: Bearer (env LOAM_API_KEY)")
	fs.StringVar(&g.zone, "zone", g.zone, "pick a log node of this zone through the node registry (env LOAM_ZONE)")
	fs.StringVar(&g.caCert, "ca-cert", g.caCert, "PEM CA that verifies an https:// server (env LOAM_CA_CERT; default: the system's roots)")
}

// client returns an API client for the global flags.
func (g *globals) client() (*streamapi.Client, error) {
	if g.namespace == "" {
		return nil, usagef("--namespace is empty")
	}
	server := g.server
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	var opts []streamapi.Option
	if g.apiKey != "" {
		opts = append(opts, streamapi.WithAPIKey(g.apiKey))
	}
	opts = append(opts, streamapi.WithUserAgent("loam-cli/"+versionString()))
	scheme, _, _ := strings.Cut(server, "://")
	if g.caCert != "" {
		if scheme != "https" {
			return nil, usagef("--ca-cert %s: the server %q is not https://", g.caCert, g.server)
		}
		hc, err := httpsClient(g.caCert)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca-cert: %w", err)}
		}
		opts = append(opts, streamapi.WithHTTPClient(hc))
	}
	c, err := streamapi.NewClient(server, opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("--server %q: %w", g.server, err)}
	}
	if g.zone == "" {
		return c, nil
	}
	// Zone-aware discovery: any node answers with the live nodes of the zone (all live
	// nodes when the zone has none); talk to one of them. If discovery fails, the server
	// given is used as it is.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx, g.zone)
	if err != nil || len(nodes) == 0 {
		return c, nil
	}
	n := nodes[rand.IntN(len(nodes))]
	zc, err := streamapi.NewClient(scheme+"://"+n.HTTPAddr, opts...)
	if err != nil {
		return c, nil
	}
	return zc, nil
}

// httpsClient is an HTTP client (HTTP/2 when the server offers it) that verifies servers
// against the CA in caFile, reloaded when the file changes.
func httpsClient(caFile string) (*http.Client, error) {
	src, err := tlsconf.Load(tlsconf.Config{CAFile: caFile})
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = src.ClientConfig()
	t.ForceAttemptHTTP2 = true
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}, nil
}

// command is one subcommand. args excludes the command's own name. Every command answers
// -h by printing its usage to stdout and returning errHelpShown.
type command struct {
	name string
	run  func(ctx context.Context, g *globals, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"stream create", runStreamCreate},
		{"stream list", runStreamList},
		{"stream describe", runStreamDescribe},
		{"stream update", runStreamUpdate},
		{"stream delete", runStreamDelete},
		{"produce", runProduce},
		{"consume", runConsume},
		{"consumer list", runConsumerList},
		{"consumer describe", runConsumerDescribe},
		{"kafka-group list", runKafkaGroupList}, // kafkagroup.go
		{"kafka-group describe", runKafkaGroupDescribe},
		{"consumer delete", runConsumerDelete}, // consumer_admin.go
		{"consumer reset", runConsumerReset},
		{"quota get", runQuotaGet}, // quota.go
		{"quota set", runQuotaSet},
		{"version", runVersion},
		{"namespace create", runNamespaceCreate}, // namespace.go, key.go
		{"namespace list", runNamespaceList},
		{"namespace delete", runNamespaceDelete},
		{"namespace key", runNamespaceKey}, // namespace_key.go
		{"namespace rotate-key", runNamespaceRotateKey},
		{"namespace shred", runNamespaceShred},
		{"key create", runKeyCreate},
		{"key list", runKeyList},
		{"key revoke", runKeyRevoke},
		{"cost", runCost}, // cost.go
	}
}

// aliases map a command's other spellings to its name.
var aliases = map[string]string{
	"consumers": "consumer list", "consumer ls": "consumer list", "consumer get": "consumer describe",
	"streams": "stream list", "stream ls": "stream list", "stream get": "stream describe",
	"stream rm": "stream delete", "stream alter": "stream update",
}

// lookup finds the command named by the first one or two words of args and returns it
// with the remaining args.
func lookup(args []string) (command, []string, bool) {
	try := func(name string, rest []string) (command, []string, bool) {
		if a, ok := aliases[name]; ok {
			name = a
		}
		for _, c := range commands() {
			if c.name == name {
				return c, rest, true
			}
		}
		return command{}, nil, false
	}
	if len(args) >= 2 {
		if c, rest, ok := try(args[0]+" "+args[1], args[2:]); ok {
			return c, rest, true
		}
	}
	if len(args) >= 1 {
		return try(args[0], args[1:])
	}
	return command{}, nil, false
}

// run is the whole command: it parses args, runs the command and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelpShown), errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "loam: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "loam: %v\n", describeErr(err))
		return exitError
	}
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	g := defaultGlobals()
	top := flag.NewFlagSet("loam", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, mainUsage)
			return nil
		}
		return usageError{fmt.Errorf("%w (run 'loam help')", err)}
	}
	args = top.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return usagef("no command given")
	}
	switch args[0] {
	case "help":
		return runHelp(ctx, args[1:], stdout)
	case "dev":
		return runDev(ctx, args[1:])
	}
	if ok, err := runRole(args[0], args[1:]); ok {
		return err
	}
	cmd, rest, ok := lookup(args)
	if !ok {
		if args[0] == "consumer" {
			return usagef("consumer: want a subcommand: list, describe, delete or reset (run 'loam help')")
		}
		if args[0] == "quota" {
			return usagef("quota: want a subcommand: get or set (run 'loam help')")
		}
		if args[0] == "stream" {
			return usagef("stream: want a subcommand: create, list, describe, update or delete (run 'loam help')")
		}
		return usagef("unknown command %q (run 'loam help')", strings.Join(args[:min(len(args), 2)], " "))
	}
	return cmd.run(ctx, &g, rest, stdin, stdout, stderr)
}

func runHelp(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage)
		return nil
	}
	if args[0] == "dev" {
		return runDev(ctx, []string{"-h"}) // prints its usage and returns flag.ErrHelp
	}
	if ok, err := runRole(args[0], append(args[1:], "-h")); ok {
		return err // the role printed its usage (and exits)
	}
	cmd, rest, ok := lookup(args)
	if !ok || len(rest) > 0 {
		return usagef("help: unknown command %q", strings.Join(args, " "))
	}
	// Every command answers -h with its usage before doing anything else.
	g := defaultGlobals()
	return cmd.run(ctx, &g, []string{"-h"}, strings.NewReader(""), stdout, io.Discard)
}

// newFlagSet returns a flag set for a command, with the global flags registered.
func newFlagSet(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	return fs
}

func printUsage(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseArgs parses flags placed anywhere among the positional arguments (the flag package
// stops at the first positional one) and returns the positional arguments. After "--"
// everything is positional. -h prints the usage to stdout and returns errHelpShown.
func parseArgs(fs *flag.FlagSet, usage string, args []string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, usage, fs)
				return nil, errHelpShown
			}
			return nil, usagef("%s: %v (run 'loam help %s')", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// errHelpShown ends a command whose -h was answered: exit status 0.
var errHelpShown = errors.New("help shown")

// wantArgs checks the number of positional arguments.
func wantArgs(fs *flag.FlagSet, pos []string, names ...string) error {
	if len(pos) < len(names) {
		return usagef("%s: missing %s (run 'loam help %s')", fs.Name(), strings.Join(names[len(pos):], " and "), fs.Name())
	}
	if len(pos) > len(names) {
		return usagef("%s: unexpected argument %q (run 'loam help %s')", fs.Name(), pos[len(names)], fs.Name())
	}
	return nil
}

// describeErr shortens an error for the terminal: the server's code and message, or the
// network failure, without the client's operation prefixes. A network error gets a hint
// about --server.
func describeErr(err error) string {
	msg := shortErr(err)
	if errors.Is(err, streamapi.ErrNetwork) {
		msg += " (is the server running? set --server or LOAM_SERVER)"
	}
	return msg
}

// shortErr is describeErr without the hint, for retry notes.
func shortErr(err error) string {
	msg := err.Error()
	prefix := ""
	if i := strings.Index(msg, "streamapi: "); i > 0 {
		prefix = msg[:i]
	}
	var ae *streamapi.APIError
	if errors.As(err, &ae) {
		return prefix + ae.Error()
	}
	var ue *url.Error
	if errors.Is(err, streamapi.ErrNetwork) && errors.As(err, &ue) {
		return fmt.Sprintf("%scannot reach %s: %v", prefix, ue.URL, ue.Err)
	}
	return msg
}

// notSent reports whether err is a failure to connect: the request never left.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.Is(err, streamapi.ErrNetwork) && errors.As(err, &oe) && oe.Op == "dial"
}

// jsonIndent renders v as indented JSON without HTML escaping, ending in a newline.
func jsonIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
