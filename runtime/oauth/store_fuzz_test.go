package oauth

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// FuzzSealerOpen: a token file is bytes from disk; opening any of them
// must not panic, and only what was sealed for that server opens.
func FuzzSealerOpen(f *testing.F) {
	s, err := NewSealer(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		f.Fatal(err)
	}
	good, err := s.Seal("up", "", &Record{Token: &oauth2.Token{AccessToken: "a", Expiry: time.Unix(1, 0)}, ClientID: "c"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(good))
	f.Add([]byte{})
	f.Add(make([]byte, 28))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := s.Open("up", "", data)
		if err == nil && (rec == nil || rec.Token == nil) {
			t.Fatal("opened without a token")
		}
		if err == nil && (rec.Token.AccessToken != "a" || rec.ClientID != "c") {
			// AES-GCM: only what was sealed authenticates.
			t.Fatalf("bytes that were never sealed opened: %x", data)
		}
	})
}
