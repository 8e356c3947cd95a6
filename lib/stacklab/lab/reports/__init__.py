"""stacklab.lab.reports"""
