// Command loam runs Loam's embedded cluster (loam dev) and is a client of a log node's
// native HTTP API: stream admin, produce and consume. docs/cli.md describes every command.
//
// # Basics
//
// main only wires: run(ctx, args, stdin, stdout, stderr) parses the global flags
// (--server, --namespace, --api-key, each with a LOAM_* environment variable), finds the
// command and calls it with the same streams, and maps its error to the exit status:
// 0 success, 1 failure (the server's error code and message on stderr), 2 usage error
// (usageError). Every client command is a func(ctx, *globals, args, stdin, stdout, stderr)
// error that parses its own flags, placed anywhere among its arguments (parseArgs), and
// talks to the server through streamapi.Client. loam dev is runDev in dev.go.
//
// produce reads stdin lines into batches (sent when full, at EOF, or when stdin has nothing
// more buffered, so interactive lines go at once) and retries only failures that prove
// nothing was written. consume reads partitions one after another up to the high
// watermarks seen at the start, or, with --follow, long-polls all of them concurrently.
//
// # Caveats
//
//   - Values are line-framed: a value holding a newline cannot be produced from stdin (use
//     --value) and is only unambiguous when consumed with --format json.
//   - consume --follow reads the partitions that existed when it started; partitions added
//     later are not followed.
//   - A produce that fails with an unknown outcome (commit_unknown, a connection broken after
//     sending) is not retried: re-running the command may duplicate those records.
package main
