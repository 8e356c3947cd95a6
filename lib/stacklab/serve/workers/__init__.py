"""stacklab.serve.workers"""
