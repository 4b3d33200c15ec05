"""torch.export's ``model.json`` <-> tracepack Documents (no torch needed).

``model_json``
    schemas 5.x-8.x, nested graphs, byte for byte.
"""
