//go:build !unix

package h1

// alive cannot peek here: an idle connection counts as open, and a
// request that could not be written on it is sent again on a new one.
func (c *conn) alive() bool { return c.br.Buffered() == 0 }
