package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

// FS is a Bucket on a local directory: the embedded default. Every Put writes a temporary
// file, fsyncs it and renames it into place (IfAbsent: link(2)s it, which fails atomically
// when the name exists), then fsyncs the directory. Several FS values, and several
// processes, may share one directory.
//
// On-disk layout: the key "wal/c1/n1/0001.wal" is the file "wal%/c1%/n1%/0001.wal" under
// the root. Each key part is escaped ('%' as "%25", NUL as "%00"); directories carry a '%'
// suffix so that "a" and "a/b" can both be objects; temporary files are named "%tmp-*", a
// name no object or directory can have.
type FS struct {
	root string
}

var _ Bucket = (*FS)(nil)

// maxNameLen is NAME_MAX of the usual Linux filesystems.
const maxNameLen = 255

// NewFS opens (creating it if needed) the filesystem bucket rooted at dir.
func NewFS(dir string) (*FS, error) {
	if dir == "" {
		return nil, errors.New("objstore: new fs: empty directory")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: new fs %s: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: new fs %s: %w", dir, err)
	}
	return &FS{root: root}, nil
}

// Dir returns the absolute root directory of the bucket.
func (f *FS) Dir() string { return f.root }

// Put writes body under key (see Bucket); it returns once the object is durable.
func (f *FS) Put(ctx context.Context, key string, body []byte, opts ...PutOption) (err error) {
	dir, name, err := f.locate(ctx, "put", key)
	if err != nil {
		return err
	}
	o := ApplyPut(opts)
	defer func() {
		if err != nil && !errors.Is(err, ErrPreconditionFailed) {
			err = fmt.Errorf("objstore: put %s: %w", key, err)
		}
	}()
	tmp, err := f.createTemp(dir)
	if err != nil {
		return err
	}
	tmpPath := tmp.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmpPath)
		}
	}()
	_, err = tmp.Write(body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	if o.IfAbsent {
		// link(2) never replaces its target: of many racers exactly one succeeds.
		err = os.Link(tmpPath, final)
		_ = os.Remove(tmpPath)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("objstore: put %s: %w", key, ErrPreconditionFailed)
		}
	} else {
		err = os.Rename(tmpPath, final)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// createTemp creates a temporary file in dir, creating dir first. A concurrent Delete may
// remove an empty directory on the path meanwhile; then it tries again.
func (f *FS) createTemp(dir string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		err := f.mkdirs(dir)
		var tmp *os.File
		if err == nil {
			tmp, err = os.CreateTemp(dir, "%tmp-*")
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 100 {
			return tmp, err
		}
	}
}

// mkdirs creates dir and any missing parents below the root, fsyncing the parent of each
// directory it creates so that the new entry survives a crash.
func (f *FS) mkdirs(dir string) error {
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(f.root, dir)
	if err != nil {
		return err
	}
	cur := f.root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			if err := syncDir(parent); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
		default:
			return err
		}
	}
	return nil
}

// Get returns the body stored under key.
func (f *FS) Get(ctx context.Context, key string) ([]byte, error) {
	dir, name, err := f.locate(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	body, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fsError("get", key, err)
	}
	return body, nil
}

// GetRange returns n bytes from off of the body under key (see Bucket).
func (f *FS) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	dir, name, err := f.locate(ctx, "get range", key)
	if err != nil {
		return nil, err
	}
	file, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fsError("get range", key, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, fsError("get range", key, err)
	}
	lo, hi, err := rangeBounds(key, st.Size(), off, n)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, hi-lo)
	if _, err := file.ReadAt(buf, lo); err != nil && !(err == io.EOF && len(buf) == 0) {
		return nil, fsError("get range", key, err)
	}
	return buf, nil
}

// Stat describes the object under key.
func (f *FS) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	dir, name, err := f.locate(ctx, "stat", key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		return ObjectInfo{}, fsError("stat", key, err)
	}
	if !st.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("objstore: stat %s: %w", key, ErrNotFound)
	}
	return ObjectInfo{Key: key, Size: st.Size(), LastModified: st.ModTime()}, nil
}

// Delete removes the object under key, then the directories it leaves empty (best
// effort). A missing key is not an error.
func (f *FS) Delete(ctx context.Context, key string) error {
	dir, name, err := f.locate(ctx, "delete", key)
	if err != nil {
		return err
	}
	err = os.Remove(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	// A concurrent Delete may have removed the emptied directory already: then there is
	// nothing left to sync.
	if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	for d := dir; d != f.root && strings.HasPrefix(d, f.root); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty (or gone): stop
			break
		}
	}
	return nil
}

// List calls fn for each object under prefix in key order. It reads one directory at a
// time, so objects put or deleted while it runs may or may not be seen. An error from fn
// stops the listing and is returned as is.
func (f *FS) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	parts := strings.Split(prefix, "/")
	dirParts, partial := parts[:len(parts)-1], parts[len(parts)-1]
	dir := f.root
	keyPrefix := ""
	for _, p := range dirParts {
		if p == "" || p == "." || p == ".." {
			return nil // no valid key has this prefix
		}
		dir = filepath.Join(dir, escapePart(p)+"%")
		keyPrefix += p + "/"
	}
	if err := f.walk(ctx, dir, keyPrefix, partial, fn); err != nil {
		return err
	}
	return nil
}

type fsEntry struct {
	sortKey string // the part, with "/" appended for a directory
	part    string
	entry   fs.DirEntry
}

// walk lists the objects in dir and below, whose keys start with keyPrefix, and whose part
// in dir starts with filter. Within one directory the object "p" sorts as "p" and the
// directory "p" as "p/", the prefix of all its keys: so the walk yields key order ("a.b"
// before "a/b", "a/b" before "a0").
func (f *FS) walk(ctx context.Context, dir, keyPrefix, filter string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: list %s: %w", keyPrefix+filter, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) {
			return nil // no such prefix, or removed by a concurrent Delete
		}
		return fmt.Errorf("objstore: list %s: %w", keyPrefix+filter, err)
	}
	items := make([]fsEntry, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir():
			if !strings.HasSuffix(name, "%") {
				continue
			}
			if part, ok := unescapePart(name[:len(name)-1]); ok && strings.HasPrefix(part, filter) {
				items = append(items, fsEntry{sortKey: part + "/", part: part, entry: e})
			}
		case e.Type().IsRegular():
			if part, ok := unescapePart(name); ok && strings.HasPrefix(part, filter) {
				items = append(items, fsEntry{sortKey: part, part: part, entry: e})
			}
		}
	}
	slices.SortFunc(items, func(a, b fsEntry) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, it := range items {
		if it.entry.IsDir() {
			if err := f.walk(ctx, filepath.Join(dir, it.entry.Name()), keyPrefix+it.part+"/", "", fn); err != nil {
				return err
			}
			continue
		}
		info, err := it.entry.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return fmt.Errorf("objstore: list %s: %w", keyPrefix+it.part, err)
		}
		if err := fn(ObjectInfo{Key: keyPrefix + it.part, Size: info.Size(), LastModified: info.ModTime()}); err != nil {
			return err
		}
	}
	return nil
}

// Close does nothing; an FS bucket holds no open files between calls.
func (f *FS) Close() error { return nil }

// locate checks key and ctx and returns the directory and file name of key.
func (f *FS) locate(ctx context.Context, op, key string) (dir, name string, err error) {
	if err := checkKey(op, key); err != nil {
		return "", "", err
	}
	if err := ctx.Err(); err != nil {
		return "", "", fmt.Errorf("objstore: %s %s: %w", op, key, err)
	}
	parts := strings.Split(key, "/")
	elems := make([]string, 0, len(parts)+1)
	elems = append(elems, f.root)
	for i, p := range parts {
		e := escapePart(p)
		if i < len(parts)-1 {
			e += "%"
		}
		if len(e) > maxNameLen {
			return "", "", fmt.Errorf("objstore: %s %q: part longer than %d bytes on a filesystem: %w", op, key, maxNameLen, ErrInvalidKey)
		}
		elems = append(elems, e)
	}
	return filepath.Join(elems[:len(elems)-1]...), elems[len(elems)-1], nil
}

// fsError maps a filesystem error on key to the package's errors.
func fsError(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, key, err)
}

// escapePart turns a key part into a file name: '%' becomes "%25" and NUL "%00", so an
// escaped name holds '%' only before "25" or "00".
func escapePart(p string) string {
	if !strings.ContainsAny(p, "%\x00") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			b.WriteString("%25")
		case 0:
			b.WriteString("%00")
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

// unescapePart inverts escapePart; ok is false for names no key part escapes to
// (temporary files, foreign files).
func unescapePart(name string) (part string, ok bool) {
	if name == "" || name == "." || name == ".." || strings.IndexByte(name, 0) >= 0 {
		return "", false
	}
	if !strings.Contains(name, "%") {
		return name, utf8.ValidString(name)
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		switch {
		case strings.HasPrefix(name[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(name[i:], "%00"):
			b.WriteByte(0)
		default:
			return "", false
		}
		i += 2
	}
	part = b.String()
	return part, utf8.ValidString(part) && part != "." && part != ".."
}

// syncDir fsyncs a directory so that entries created, renamed or removed in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
