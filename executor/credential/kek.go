package credential

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
)

// KeyEncryptionKeySize is the length of a key-encryption key: AES-256.
const KeyEncryptionKeySize = 32

// KeyEncryptionKey seals the fleet's signing keys before they reach the
// store (AES-256-GCM). Every sidecar of a fleet is given the same one by
// file (serve --key-file); the database never holds it. Its String method
// does not print it.
type KeyEncryptionKey struct {
	k [KeyEncryptionKeySize]byte
}

// NewKeyEncryptionKey returns a fresh random key-encryption key.
func NewKeyEncryptionKey() (*KeyEncryptionKey, error) {
	var kek KeyEncryptionKey
	if _, err := rand.Read(kek.k[:]); err != nil {
		return nil, fmt.Errorf("%w: generate: %w", ErrKeyEncryptionKey, err)
	}
	return &kek, nil
}

// String keeps the key out of logs and error messages.
func (*KeyEncryptionKey) String() string { return "KeyEncryptionKey(redacted)" }

// ParseKeyEncryptionKey reads the text of a key file: the 32 bytes in
// standard base64 (44 characters with padding), surrounding white space
// ignored.
func ParseKeyEncryptionKey(text []byte) (*KeyEncryptionKey, error) {
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(text)))
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64 (%w): %s", ErrKeyEncryptionKey, err, keyFileAdvice)
	}
	if len(raw) != KeyEncryptionKeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d: %s", ErrKeyEncryptionKey, len(raw), KeyEncryptionKeySize, keyFileAdvice)
	}
	var kek KeyEncryptionKey
	copy(kek.k[:], raw)
	return &kek, nil
}

const keyFileAdvice = "a key file holds 32 random bytes in standard base64 on one line; create one with `countersign keyfile -o FILE` and give every sidecar of the fleet the same file"

// ReadKeyFile reads a key-encryption key from the file at path (see
// ParseKeyEncryptionKey for the format).
func ReadKeyFile(path string) (*KeyEncryptionKey, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrKeyEncryptionKey, path, err)
	}
	kek, err := ParseKeyEncryptionKey(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kek, nil
}

// WriteKeyFile creates the file at path (mode 0600; an existing file is
// refused, as overwriting a fleet's key would lose its signing keys) and
// writes a fresh key-encryption key into it.
func WriteKeyFile(path string) error {
	kek, err := NewKeyEncryptionKey()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s exists: it may be a fleet's key, which cannot be replaced without losing the signing keys it seals; remove it yourself if it is not", ErrKeyEncryptionKey, path)
		}
		return fmt.Errorf("%w: %w", ErrKeyEncryptionKey, err)
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(kek.k[:]) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("%w: write %s: %w", ErrKeyEncryptionKey, path, err)
	}
	return nil
}

// Sealed values: a version byte, the GCM nonce, then the ciphertext with
// its tag. The additional data says what the value is (and for a signing
// key, of which epoch), so a sealed value copied to another row, or read
// as another kind of value, does not open.
const sealVersion = 1

// Additional-data prefixes. A signing key's starts with one, a value of
// Seal with the other and a NUL before the caller's label, so no label can
// make a signing key's, and a sealed session token can never be opened as
// a signing key nor a signing key as anything else.
const (
	signingKeyAD = "countersign credential signing key "
	labelAD      = "countersign sealed value\x00"
)

func sealAD(epoch int) []byte {
	return []byte(signingKeyAD + kidFor(epoch))
}

func labelledAD(label string) []byte {
	return []byte(labelAD + label)
}

func (kek *KeyEncryptionKey) aead() cipher.AEAD {
	block, err := aes.NewCipher(kek.k[:])
	if err != nil {
		panic(fmt.Sprintf("credential: AES-256 with a %d-byte key: %v", len(kek.k), err))
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(fmt.Sprintf("credential: GCM: %v", err))
	}
	return gcm
}

// Seal encrypts plaintext with the key-encryption key (AES-256-GCM, a
// random nonce) for a database the key never reaches. label says what
// the value is and where it belongs (say "leadpage session token " and
// the row's key): Open opens it only under the same label, so a sealed
// value moved to another row, or taken for another kind of value, fails.
// Signing keys are sealed apart and never open through Open.
func (kek *KeyEncryptionKey) Seal(label string, plaintext []byte) ([]byte, error) {
	sealed, err := kek.sealAD(labelledAD(label), plaintext)
	if err != nil {
		return nil, fmt.Errorf("%w: seal %q: %w", ErrKeyEncryptionKey, label, err)
	}
	return sealed, nil
}

// Open decrypts what Seal returned under the same label. A wrong
// key-encryption key, another label and a damaged value all fail GCM's
// check alike: ErrKeyEncryptionKey.
func (kek *KeyEncryptionKey) Open(label string, sealed []byte) ([]byte, error) {
	plain, err := kek.openAD(labelledAD(label), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: a value sealed as %q does not open with this key-encryption key (give every sidecar of the fleet the same --key-file)", ErrKeyEncryptionKey, label)
	}
	return plain, nil
}

// errNotSealed is openAD's answer to bytes that are not a sealed value of
// this version, before any decryption.
var errNotSealed = errors.New("not a sealed value of this version")

func (kek *KeyEncryptionKey) sealAD(ad, plaintext []byte) ([]byte, error) {
	gcm := kek.aead()
	out := make([]byte, 1+gcm.NonceSize(), 1+gcm.NonceSize()+len(plaintext)+gcm.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return gcm.Seal(out, out[1:], plaintext, ad), nil
}

func (kek *KeyEncryptionKey) openAD(ad, sealed []byte) ([]byte, error) {
	gcm := kek.aead()
	if len(sealed) < 1+gcm.NonceSize()+gcm.Overhead() || sealed[0] != sealVersion {
		return nil, errNotSealed
	}
	nonce, ct := sealed[1:1+gcm.NonceSize()], sealed[1+gcm.NonceSize():]
	return gcm.Open(nil, nonce, ct, ad)
}

// seal encrypts the seed of epoch's private key.
func (kek *KeyEncryptionKey) seal(epoch int, seed []byte) ([]byte, error) {
	sealed, err := kek.sealAD(sealAD(epoch), seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyStore, err)
	}
	return sealed, nil
}

// open decrypts what seal returned for epoch. A wrong key-encryption key,
// a sealed key of another epoch and a damaged one all fail GCM's check
// alike: ErrKeyEncryptionKey.
func (kek *KeyEncryptionKey) open(epoch int, sealed []byte) ([]byte, error) {
	seed, err := kek.openAD(sealAD(epoch), sealed)
	switch {
	case errors.Is(err, errNotSealed):
		return nil, fmt.Errorf("%w: the stored key of epoch %d is not a sealed key of this version", ErrKeyStore, epoch)
	case err != nil:
		return nil, fmt.Errorf("%w: it does not open the fleet's signing key of epoch %d in the store: give this sidecar the same --key-file as the fleet's other sidecars (the one the keys were sealed with)", ErrKeyEncryptionKey, epoch)
	}
	return seed, nil
}
