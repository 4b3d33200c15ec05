"""Importers and exporters between legacy formats and tracepack documents.

``export_json``
    torch.export's ``model.json`` (schema 5.x-8.x, 5.3's file tables, nested graphs) <-> Document,
    byte for byte;
``archives``
    ``.pt2`` and TorchScript ``.pt``/``.ptl`` archives -> Document (``import_archive``), and the
    original archive rebuilt around a document (``expand_archive``: debug_pkl in either layout);
``pt2``
    ``tracepack pack``/``unpack``: a ``.pt2`` whose node metadata lives in a tracepack member.

Each module exposes ``import_*`` (legacy -> Document) and ``export_*``/``expand_*``
(Document -> legacy) and never imports torch (``tracepack.torch`` does).
"""
