//go:build unix

package h1

import "syscall"

// alive reports whether an idle connection is still open and silent: a
// server that closed it (or sent something unasked) makes it unusable. One
// non-blocking peek, no wait.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK // else data, EOF or an error
		return true
	})
	return err == nil && alive
}
