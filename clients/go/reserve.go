package delayq

// A RESERVE with a TIMEOUT parks its connection on the server until it is answered (RESP
// answers in order), so each waiting reserve holds a connection of its own, taken from the
// pool and given back once answered. The calling goroutine reads the reply; a second one
// watches the context.
//
// Cancelling withdraws the reserve on the server before Reserve returns: the watcher shuts down
// the connection's sending side (FIN), which the server takes as the client leaving (it
// withdraws the reserve and closes), and the reader reads what comes back until then. A reply
// already on its way — jobs handed out just before — is given back at once with UNRESERVE
// (ready again, the attempt not counted), so a cancelled reserve holds no job.

import (
	"context"
	"time"
)

func (c *Client) reserveWaiting(ctx context.Context, o ReserveOptions, wait time.Duration) ([]*Delivery, error) {
	end := time.Now().Add(wait)
	var goingAway *Error // the answer of a server that stopped while the reserve waited on it
	for {
		cmd, _, err := reserveCommand(ReserveOptions{Topics: o.Topics, Count: o.Count, Wait: wait})
		if err != nil {
			return nil, err
		}
		cn, err := c.send(ctx, cmd)
		if err != nil {
			if goingAway != nil && codeOf(err) == CodeUnavailable {
				// Its answer first, so the message still begins "shutting down: ".
				return nil, unavailable(goingAway.Message+"; no other server took the reserve: "+
					err.(*Error).Message, err)
			}
			return nil, err
		}
		jobs, err := c.awaitReserve(ctx, cn, wait)
		if !IsShuttingDown(err) {
			return jobs, err
		}
		// The server is going away: it took nothing. With another server and time left, the
		// reserve goes there for what is left of its wait.
		addr := c.servers[cn.server].addr
		c.goingAway(cn.server)
		goingAway = unavailable(err.(*Error).Message+" (delayq server "+addr+")", nil)
		wait = time.Until(end)
		if len(c.servers) < 2 || wait <= 0 || ctxErr(ctx) != nil {
			return nil, goingAway
		}
	}
}

// awaitReserve reads the reply of the RESERVE written on cn, or withdraws it when ctx ends.
func (c *Client) awaitReserve(ctx context.Context, cn *conn, wait time.Duration) ([]*Delivery, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cn.close()
		return nil, errClosed
	}
	c.waiting[cn] = true
	c.mu.Unlock()
	cn.nc.SetReadDeadline(time.Now().Add(wait + c.requestTimeout))
	withdrawn := false
	stop := func() {}
	if ctx.Done() != nil {
		stop = watch(ctx, func() {
			withdrawn = true
			cn.closeWrite()
			cn.nc.SetReadDeadline(time.Now().Add(c.requestTimeout))
		})
	}
	v, err := cn.r.Read()
	stop() // withdrawn is settled from here on
	c.mu.Lock()
	closed := c.closed
	delete(c.waiting, cn)
	c.mu.Unlock()

	server := c.servers[cn.server].addr
	if withdrawn {
		cn.close()
		if err == nil {
			if jobs, perr := parseDeliveries(v); perr == nil && len(jobs) > 0 {
				c.unreserveAll(jobs)
			}
		}
		return nil, ctxError(ctx, "reserve withdrawn from delayq server "+server)
	}
	if closed {
		cn.close()
		return nil, errClosed
	}
	if err != nil {
		why := c.why(err)
		c.broken(cn, why)
		return nil, unavailable("delayq server "+server+": "+why+
			"; the reserve's reply was lost (jobs it may have taken come back after their TTR)", err)
	}
	jobs, err := parseDeliveries(v)
	if codeOf(err) == CodeUnavailable {
		cn.close() // malformed, or the server is going away: it closes the connection
	} else {
		c.release(cn)
	}
	return jobs, err
}
