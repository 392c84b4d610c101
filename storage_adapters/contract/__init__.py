"""The storage contract's families, a ``Protocol`` each, and the optional abilities beyond them;
``storage_adapters.base`` joins the families into ``Storage`` and re-exports every one."""
