package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Record is what the store keeps for one server and identity: the token
// and what refreshing it needs (the client and the token endpoint). It
// has no String method; print it and you get field names, so never print
// it.
type Record struct {
	Token        *oauth2.Token `json:"token"`
	ClientID     string        `json:"client_id"`
	ClientSecret string        `json:"client_secret,omitempty"`
	TokenURL     string        `json:"token_url"`
	AuthStyle    int           `json:"auth_style,omitempty"`
	Scopes       []string      `json:"scopes,omitempty"`
	Issuer       string        `json:"issuer,omitempty"`
	Saved        time.Time     `json:"saved"`
}

// Store keeps sealed records. The file store is the single-node one; a
// fleet's store (JetStream KV) implements the same three methods.
type Store interface {
	// Load returns the record of server and identity, or nil when there
	// is none.
	Load(server, identity string) (*Record, error)
	// Save replaces the record.
	Save(server, identity string, rec *Record) error
	// Delete forgets the record; none is not an error.
	Delete(server, identity string) error
}

// Sealer encrypts records with AES-256-GCM; the server and identity are
// the additional data.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("token store key: want 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("token store key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

func recordAD(server, identity string) []byte {
	return []byte("edge-mcp oauth v1\x00" + server + "\x00" + identity)
}

// Seal encodes and encrypts rec for server and identity.
func (s *Sealer) Seal(server, identity string, rec *Record) ([]byte, error) {
	plain, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding the token record of %q: %w", server, err)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, recordAD(server, identity)), nil
}

// Open decrypts and decodes a sealed record of server and identity.
func (s *Sealer) Open(server, identity string, sealed []byte) (*Record, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, fmt.Errorf("token record of %q: too short", server)
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], recordAD(server, identity))
	if err != nil {
		return nil, fmt.Errorf("token record of %q does not open with the configured key (was oauth.key changed?)", server)
	}
	var rec Record
	if err := json.Unmarshal(plain, &rec); err != nil || rec.Token == nil {
		return nil, fmt.Errorf("token record of %q: malformed", server)
	}
	return &rec, nil
}

// FileStore keeps one sealed file per server and identity in a folder
// (mode 0700, files 0600). Its zero folder keeps records in memory only.
type FileStore struct {
	dir    string
	sealer *Sealer
	mu     sync.Mutex
	mem    map[string][]byte
}

// NewFileStore returns a store in dir ("" for memory only).
func NewFileStore(dir string, sealer *Sealer) (*FileStore, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the token store %s: %w", dir, err)
		}
	}
	return &FileStore{dir: dir, sealer: sealer, mem: map[string][]byte{}}, nil
}

// fileName is the record's file: a hash of server and identity, so that
// neither shows in the folder.
func fileName(server, identity string) string {
	sum := sha256.Sum256(recordAD(server, identity))
	return hex.EncodeToString(sum[:12]) + ".tok"
}

// Load implements Store.
func (f *FileStore) Load(server, identity string) (*Record, error) {
	name := fileName(server, identity)
	var sealed []byte
	if f.dir == "" {
		f.mu.Lock()
		sealed = f.mem[name]
		f.mu.Unlock()
	} else {
		var err error
		sealed, err = os.ReadFile(filepath.Join(f.dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the token record of %q: %w", server, err)
		}
	}
	if sealed == nil {
		return nil, nil
	}
	return f.sealer.Open(server, identity, sealed)
}

// Save implements Store: written to a temporary file and renamed.
func (f *FileStore) Save(server, identity string, rec *Record) error {
	sealed, err := f.sealer.Seal(server, identity, rec)
	if err != nil {
		return err
	}
	name := fileName(server, identity)
	if f.dir == "" {
		f.mu.Lock()
		f.mem[name] = sealed
		f.mu.Unlock()
		return nil
	}
	tmp, err := os.CreateTemp(f.dir, name+".*")
	if err != nil {
		return fmt.Errorf("saving the token record of %q: %w", server, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(sealed); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the token record of %q: %w", server, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving the token record of %q: %w", server, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(f.dir, name)); err != nil {
		return fmt.Errorf("saving the token record of %q: %w", server, err)
	}
	return nil
}

// Delete implements Store.
func (f *FileStore) Delete(server, identity string) error {
	name := fileName(server, identity)
	if f.dir == "" {
		f.mu.Lock()
		delete(f.mem, name)
		f.mu.Unlock()
		return nil
	}
	if err := os.Remove(filepath.Join(f.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting the token record of %q: %w", server, err)
	}
	return nil
}

// LoadOrCreateKey reads the 32-byte key at path (base64 or hex, or 32 raw
// bytes), creating it with a random key (mode 0600) when it is absent.
func LoadOrCreateKey(path string, decode func(string) ([]byte, error)) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating the token store key %s: %w", path, err)
		}
		key := make([]byte, 32)
		rand.Read(key)
		text := hex.EncodeToString(key) + "\n"
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("creating the token store key %s: %w", path, err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			return nil, fmt.Errorf("writing the token store key %s: %w", path, err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the token store key %s: %w", path, err)
	}
	if len(data) == 32 {
		return data, nil
	}
	key, err := decode(string(data))
	if err != nil {
		return nil, fmt.Errorf("token store key %s: %w", path, err)
	}
	return key, nil
}
