"""Discovery (ibnetdiscover) and design-vs-actual compare of managed fabrics."""
