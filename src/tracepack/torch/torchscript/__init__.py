"""TorchScript archives (no torch needed): ``debug_pkl`` source ranges in both layouts, the
lite interpreter's mobile debug maps, and the data-only pickle reader and writer they use.

``archive``
    the code/debug members of a ``.pt``/``.ptl`` archive;
``debug_pkl``
    source-range pickles, legacy and string-table layouts;
``render``
    a debug handle's module hierarchy and TorchScript traceback, as the lite interpreter prints them;
``pickle_reader`` / ``pickle_writer``
    a data-only pickle reader (never imports or calls anything from the stream) and writer.
"""
