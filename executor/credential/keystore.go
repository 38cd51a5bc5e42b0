package credential

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// keyring keeps the epochs' private keys: files under Dir/keys for one
// sidecar (fileKeys), or the store a fleet shares (storeKeys).
type keyring interface {
	// load returns the current epoch and its key, creating epoch 1 when
	// there is none.
	load() (int, jwk.Key, error)
	// raise keeps a fresh key for the epoch after the current one (which
	// the caller believes is current) and returns that epoch and key.
	raise(current int) (int, jwk.Key, error)
	// latest returns the current epoch and its key when the epoch is not
	// have, and (have, nil) when it is.
	latest(have int) (int, jwk.Key, error)
}

// fileKeys is the keyring of one sidecar: Dir/keys/epoch-N.json. The
// process owns the directory, so the epoch it holds is always current.
type fileKeys struct {
	dir string
	log *slog.Logger
}

var _ keyring = fileKeys{}

func (f fileKeys) load() (int, jwk.Key, error) {
	if err := prepareKeyDir(f.dir); err != nil {
		return 0, nil, err
	}
	epoch, key, err := loadHighest(f.dir, f.log)
	if err != nil || key != nil {
		return epoch, key, err
	}
	if key, err = generateKey(1); err != nil {
		return 0, nil, err
	}
	if err := persistKey(f.dir, 1, key); err != nil {
		return 0, nil, err
	}
	f.log.Info("created signing key", "epoch", 1, "kid", kidFor(1))
	return 1, key, nil
}

func (f fileKeys) raise(current int) (int, jwk.Key, error) {
	next := current + 1
	key, err := generateKey(next)
	if err != nil {
		return 0, nil, err
	}
	if err := persistKey(f.dir, next, key); err != nil {
		return 0, nil, err
	}
	removeOlder(f.dir, next, f.log)
	return next, key, nil
}

func (fileKeys) latest(have int) (int, jwk.Key, error) { return have, nil, nil }

// Key files: Dir/keys/epoch-N.json, each the private JWK of one epoch.
const (
	keyFilePrefix = "epoch-"
	keyFileSuffix = ".json"
	tmpPrefix     = ".tmp-"
	dirMode       = 0o700
	fileMode      = 0o600
)

func keyFileName(epoch int) string {
	return keyFilePrefix + strconv.Itoa(epoch) + keyFileSuffix
}

// parseKeyFileName returns N for "epoch-N.json" (N >= 1, no leading zeros).
func parseKeyFileName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, keyFilePrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, keyFileSuffix); !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || keyFileName(n) != name {
		return 0, false
	}
	return n, true
}

// prepareKeyDir creates dir 0700 (tightening it if it exists) and removes
// temporary files a crash in the middle of persistKey may have left.
func prepareKeyDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("%w: create %s: %w", ErrKeyStore, dir, err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return fmt.Errorf("%w: chmod %s: %w", ErrKeyStore, dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: read %s: %w", ErrKeyStore, dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// loadHighest returns the highest epoch on disk and its key, or (0, nil)
// when there is none.
func loadHighest(dir string, log *slog.Logger) (int, jwk.Key, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read %s: %w", ErrKeyStore, dir, err)
	}
	highest := 0
	for _, e := range entries {
		if n, ok := parseKeyFileName(e.Name()); ok && e.Type().IsRegular() && n > highest {
			highest = n
		}
	}
	if highest == 0 {
		return 0, nil, nil
	}
	path := filepath.Join(dir, keyFileName(highest))
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&^fileMode != 0 {
		// A copy or restore may have widened the mode. The key is a
		// credential: narrow it back and say so.
		log.Warn("signing key file was readable by others; restricting it to 0600",
			"path", path, "mode", fi.Mode().Perm().String())
		if err := os.Chmod(path, fileMode); err != nil {
			return 0, nil, fmt.Errorf("%w: chmod %s: %w", ErrKeyStore, path, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read %s: %w", ErrKeyStore, path, err)
	}
	key, err := jwk.ParseKey(data)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s is not a JWK (restore it from backup, or raise the epoch from a clean keys directory): %w", ErrKeyStore, path, err)
	}
	if err := checkKey(key, highest); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %w", ErrKeyStore, path, err)
	}
	return highest, key, nil
}

// checkKey makes sure a loaded key is an Ed25519 private key for epoch.
func checkKey(key jwk.Key, epoch int) error {
	if key.KeyType() != jwa.OKP() {
		return fmt.Errorf("key type %s, want OKP (Ed25519)", key.KeyType())
	}
	var raw ed25519.PrivateKey
	if err := jwk.Export(key, &raw); err != nil {
		return fmt.Errorf("not an Ed25519 private key: %w", err)
	}
	if kid, _ := key.KeyID(); kid != kidFor(epoch) {
		return fmt.Errorf("kid %q, want %q", kid, kidFor(epoch))
	}
	if alg, _ := key.Algorithm(); alg != jwa.EdDSA() {
		return fmt.Errorf("alg %v, want EdDSA", alg)
	}
	return nil
}

// generateKey makes a fresh Ed25519 key for epoch (see jwkFor).
func generateKey(epoch int) (jwk.Key, error) {
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generate Ed25519 key: %w", ErrKeyStore, err)
	}
	return jwkFor(epoch, raw)
}

// jwkFor is raw as the private key of epoch: a jwk.Key with kid, alg and
// use set, so both signatures and the JWKS carry them.
func jwkFor(epoch int, raw ed25519.PrivateKey) (jwk.Key, error) {
	key, err := jwk.Import(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: import Ed25519 key: %w", ErrKeyStore, err)
	}
	for name, v := range map[string]any{
		jwk.KeyIDKey:     kidFor(epoch),
		jwk.AlgorithmKey: jwa.EdDSA(),
		jwk.KeyUsageKey:  jwk.ForSignature,
	} {
		if err := key.Set(name, v); err != nil {
			return nil, fmt.Errorf("%w: set %s: %w", ErrKeyStore, name, err)
		}
	}
	return key, nil
}

// persistKey writes the private key of epoch atomically: a temporary file
// in the same directory, fsync, rename, fsync of the directory. A reader
// (or a restart) sees the whole file or none of it.
func persistKey(dir string, epoch int, key jwk.Key) error {
	final := filepath.Join(dir, keyFileName(epoch))
	if _, err := os.Lstat(final); err == nil {
		return fmt.Errorf("%w: %s (another process may own this data directory)", ErrEpochConflict, final)
	}
	data, err := json.Marshal(key)
	if err != nil {
		return fmt.Errorf("%w: encode key of epoch %d: %w", ErrKeyStore, epoch, err)
	}
	f, err := os.CreateTemp(dir, tmpPrefix+keyFileName(epoch)+"-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("%w: chmod %s: %w", ErrKeyStore, tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrKeyStore, tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrKeyStore, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %w", ErrKeyStore, tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("%w: rename to %s: %w", ErrKeyStore, final, err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrKeyStore, dir, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeOlder deletes the private keys of epochs before current. They are
// revoked; keeping them would only keep a usable signing key on disk.
func removeOlder(dir string, current int, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("could not list old signing keys", "dir", dir, "err", err)
		return
	}
	for _, e := range entries {
		if n, ok := parseKeyFileName(e.Name()); ok && n < current {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				log.Warn("could not remove revoked signing key", "epoch", n, "err", err)
			}
		}
	}
}
