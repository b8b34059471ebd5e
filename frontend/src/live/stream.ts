// One live socket: sequence numbers checked, a gap (or a reconnect) triggers a REST resync.

import type { Message } from "./types";

export interface StreamHandlers {
  message(msg: Message): void;
  resync(): Promise<number>; // returns the group's seq the snapshot reflects
  status(text: string): void;
}

export class LiveStream {
  private socket: WebSocket | null = null;
  private seq = 0;
  private syncing = false;
  private backoff = 500;
  resyncs = 0;

  constructor(private path: string, private handlers: StreamHandlers) {}

  close(): void {
    this.socket?.close();
  }

  open(): void {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${this.path}`);
    this.socket = socket;
    socket.onopen = () => {
      this.backoff = 500;
      this.handlers.status("live");
    };
    socket.onmessage = (ev: MessageEvent<string>) => this.onMessage(JSON.parse(ev.data) as Message);
    socket.onclose = (ev: CloseEvent) => {
      this.handlers.status(ev.code === 4403 ? "access revoked" : "reconnecting…");
      if (ev.code === 4403 || ev.code === 4401) return;
      window.setTimeout(() => this.open(), this.backoff + Math.random() * 500);
      this.backoff = Math.min(this.backoff * 2, 15000);
    };
  }

  private async sync(): Promise<void> {
    if (this.syncing) return;
    this.syncing = true;
    try {
      this.seq = await this.handlers.resync();
      this.resyncs += 1;
    } finally {
      this.syncing = false;
    }
  }

  private onMessage(msg: Message): void {
    if (msg.type === "subscribed") {
      void this.sync();
      return;
    }
    if ("seq" in msg && msg.type !== "change.progress") {
      if (msg.seq <= this.seq) return; // already in the snapshot
      if (msg.seq !== this.seq + 1 && !this.syncing) {
        void this.sync(); // a gap: something was dropped
        return;
      }
      this.seq = msg.seq;
    }
    this.handlers.message(msg);
  }
}
