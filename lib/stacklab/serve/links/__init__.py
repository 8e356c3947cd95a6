"""stacklab.serve.links"""
